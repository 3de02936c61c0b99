"""Domain adaptation by adversarial training: `DANN`, `CDAN` and `MDD`, Keras
models made of a feature extractor, a label head and an adversary, with
`GradReverse`, the batches, the losses and the schedules wired in.

One file per method, holding its loss whole, over the shared parts beside them,
and two folders for the two other jobs:

* `dann`, `cdan`, `mdd`: the methods;
* `model`: `AdversarialModel`, the foundation the three share (construction,
  `compile`, `fit`, saving), over `objective` (the objective's sum and one
  training step, which it inherits);
* `domain_head`: what DANN and CDAN share, the domain head behind the
  reversal, its loss and the paper's domain term;
* `ensemble`: `ProbabilityEnsemble`, the mean of trained classifiers'
  probabilities (`select_without_labels`' gated ensemble);
* `student`: `Student`, one network taught on the target by a fixed teacher
  (the ensemble's pseudo-labels and the conditional entropy);
* `networks`, `heads`: the user's networks checked and built, a head's activation,
  the label head's class log-probabilities (CDAN, MDD);
* `training/`: how the models train on each backend (one file per backend's
  step), the paired batches (`paired_dataset`), resuming after a preemption,
  the parts' optimizers;
* `validation/`: choosing without target labels: the validators and their
  scores, `ValidatorCallback`, `select_without_labels`, reverse validation.

The schedules over training, the lambda ramp (shared with
`DANNLambdaSchedule`) and the learning rate (`DANNLearningRateSchedule`),
are `grad_reverse.schedule`'s.
"""

from grad_reverse.adaptation.cdan import CDAN
from grad_reverse.adaptation.dann import DANN
from grad_reverse.adaptation.ensemble import ProbabilityEnsemble
from grad_reverse.adaptation.mdd import MDD
from grad_reverse.adaptation.student import Student
from grad_reverse.adaptation.validation.callback import ValidatorCallback
from grad_reverse.adaptation.validation.reverse_validation import (
    ReverseValidation,
    ReverseValidator,
    reverse_validation,
    select_by_reverse_validation,
)
from grad_reverse.adaptation.validation.selection import DEFAULT_CHOICE, Selection, select_without_labels
from grad_reverse.adaptation.validation.validators import (
    DEFAULT_VALIDATOR,
    POOL_VALIDATORS,
    VALIDATORS,
    BatchNuclearNorm,
    DeepEmbeddedValidation,
    EnsembleValidation,
    InformationMaximization,
    MixVal,
    PoolValidator,
    PredictionEntropy,
    SoftNeighborhoodDensity,
    SourceAccuracy,
    SourceAccuracyAndAlignment,
    Validator,
)
from grad_reverse.backend_ops import ON_TENSORFLOW
from grad_reverse.schedule import DANNLearningRateSchedule, ScaledLearningRate

# TensorFlow's first in the else branch: the API reference's generator reads both branches and
# documents the last import of a name, which must be the tf.data version users call.
if not ON_TENSORFLOW:
    from grad_reverse.adaptation.training.array_batches import paired_dataset
else:
    from grad_reverse.adaptation.training.batches import paired_dataset

__all__ = [
    "CDAN",
    "DANN",
    "MDD",
    "DEFAULT_CHOICE",
    "DEFAULT_VALIDATOR",
    "POOL_VALIDATORS",
    "VALIDATORS",
    "BatchNuclearNorm",
    "DANNLearningRateSchedule",
    "DeepEmbeddedValidation",
    "EnsembleValidation",
    "InformationMaximization",
    "MixVal",
    "PoolValidator",
    "ProbabilityEnsemble",
    "PredictionEntropy",
    "ReverseValidation",
    "ReverseValidator",
    "ScaledLearningRate",
    "Selection",
    "SoftNeighborhoodDensity",
    "SourceAccuracy",
    "SourceAccuracyAndAlignment",
    "Student",
    "Validator",
    "ValidatorCallback",
    "paired_dataset",
    "reverse_validation",
    "select_by_reverse_validation",
    "select_without_labels",
]
