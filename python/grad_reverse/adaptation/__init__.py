"""Domain-adversarial training in a few lines: `DANN`, `CDAN` and `MDD`, Keras
models made of a feature extractor, a label head and an adversary, with
`GradReverse`, the batches, the losses and the schedules wired in.

* `model`: `AdversarialModel`, the foundation the three share (training step, `fit`, saving);
* `dann`, `cdan`, `mdd`: one file per method; `domain_head`: what DANN and CDAN share;
* `probabilities`: class probabilities from a label head (CDAN, MDD);
* `objective`: the domain term of the paper's objective, and the earlier one;
* `optimizers`: own optimizers or learning-rate scales for the feature
  extractor and the domain head;
* `data`: `paired_dataset`, the source + target batches, and the input checks;
* `schedules`: lambda inside the step, `DANNLearningRateSchedule`, `ScaledLearningRate`;
* `reverse_validation`: scoring a configuration without target labels (§5.1.2 of the paper);
* `keras_compat`: where Keras 2 and Keras 3 differ for the training step.
"""

from grad_reverse.dann.data import paired_dataset
from grad_reverse.dann.cdan import CDAN
from grad_reverse.dann.dann import DANN
from grad_reverse.dann.mdd import MDD
from grad_reverse.dann.reverse_validation import ReverseValidation, reverse_validation, select_by_reverse_validation
from grad_reverse.dann.schedules import DANNLearningRateSchedule, ScaledLearningRate

__all__ = ["CDAN", "DANN", "MDD", "DANNLearningRateSchedule", "ReverseValidation", "ScaledLearningRate",
           "paired_dataset",
           "reverse_validation", "select_by_reverse_validation"]
