"""Domain adaptation by adversarial training: `DANN`, `CDAN` and `MDD`, Keras
models made of a feature extractor, a label head and an adversary, with
`GradReverse`, the batches, the losses and the schedules wired in.

One file per method, holding its loss whole, over the shared parts beside them:

* `dann`, `cdan`, `mdd`: the methods;
* `model`: `AdversarialModel`, the foundation the three share (the training
  step, `fit`, saving);
* `domain_head`: what DANN and CDAN share, the domain head behind the
  reversal, its loss and the paper's domain term;
* `networks`: the user's networks checked and built, a head's activation,
  the label head's class log-probabilities (CDAN, MDD);
* `batches`: `paired_dataset`, the source + target batches, and the input checks;
* `resume`: where a fit starts (the ramp and the batches follow the epoch
  Keras starts at, after a preemption too);
* `optimizers`: own optimizers or learning-rate scales for the feature
  extractor and the adversary;
* `reverse_validation`: scoring a configuration without target labels (§5.1.2 of the paper);
* `keras_compat`: where Keras 2 and Keras 3 differ for the training step and saving.

The schedules over training, the lambda ramp (shared with
`DANNLambdaSchedule`) and the learning rate (`DANNLearningRateSchedule`),
are `grad_reverse.schedule`'s.
"""

from grad_reverse.adaptation.batches import paired_dataset
from grad_reverse.adaptation.cdan import CDAN
from grad_reverse.adaptation.dann import DANN
from grad_reverse.adaptation.mdd import MDD
from grad_reverse.adaptation.reverse_validation import (
    ReverseValidation,
    reverse_validation,
    select_by_reverse_validation,
)
from grad_reverse.schedule import DANNLearningRateSchedule, ScaledLearningRate

__all__ = [
    "CDAN",
    "DANN",
    "MDD",
    "DANNLearningRateSchedule",
    "ReverseValidation",
    "ScaledLearningRate",
    "paired_dataset",
    "reverse_validation",
    "select_by_reverse_validation",
]
