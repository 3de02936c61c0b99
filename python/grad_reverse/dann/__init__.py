"""Domain-adversarial training in a few lines: `DANN`, a Keras model made of
a feature extractor, a label head and a domain head, with `GradReverse`,
the batches, the losses and the paper's schedules wired in.

* `model`: the `DANN` class (training step, `fit`, saving);
* `data`: `paired_dataset`, the source + target batches, and the input checks;
* `schedules`: lambda inside the step, `DANNLearningRateSchedule`;
* `keras_compat`: where Keras 2 and Keras 3 differ for the training step.
"""

from grad_reverse.dann.data import paired_dataset
from grad_reverse.dann.model import DANN
from grad_reverse.dann.schedules import DANNLearningRateSchedule

__all__ = ["DANN", "DANNLearningRateSchedule", "paired_dataset"]
