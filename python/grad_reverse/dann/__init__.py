"""Domain-adversarial training in a few lines: `DANN`, a Keras model made of
a feature extractor, a label head and a domain head, with `GradReverse`,
the batches, the losses and the paper's schedules wired in.

* `model`: the `DANN` class (training step, `fit`, saving);
* `objective`: the domain term of the paper's objective, and the earlier one;
* `optimizers`: own optimizers or learning-rate scales for the feature
  extractor and the domain head;
* `data`: `paired_dataset`, the source + target batches, and the input checks;
* `schedules`: lambda inside the step, `DANNLearningRateSchedule`, `ScaledLearningRate`;
* `reverse_validation`: scoring a configuration without target labels (§5.1.2 of the paper);
* `keras_compat`: where Keras 2 and Keras 3 differ for the training step.
"""

from grad_reverse.dann.data import paired_dataset
from grad_reverse.dann.model import DANN
from grad_reverse.dann.reverse_validation import ReverseValidation, reverse_validation, select_by_reverse_validation
from grad_reverse.dann.schedules import DANNLearningRateSchedule, ScaledLearningRate

__all__ = ["DANN", "DANNLearningRateSchedule", "ReverseValidation", "ScaledLearningRate", "paired_dataset",
           "reverse_validation", "select_by_reverse_validation"]
