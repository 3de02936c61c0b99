"""Domain adaptation by adversarial training: `DANN`, `CDAN` and `MDD`, Keras
models made of a feature extractor, a label head and an adversary, with
`GradReverse`, the batches, the losses and the schedules wired in.

One file per method, holding its loss whole, over the shared parts beside them:

* `dann`, `cdan`, `mdd`: the methods;
* `model`: `AdversarialModel`, the foundation the three share (the training
  step, `fit`, saving);
* `domain_head`: what DANN and CDAN share, the domain head behind the
  reversal, its loss and the paper's domain term;
* `networks`, `heads`: the user's networks checked and built, a head's activation,
  the label head's class log-probabilities (CDAN, MDD);
* `batches`: `paired_dataset`, the source + target batches on tf.data (TensorFlow),
  and the input checks; `array_batches`: the same batches from arrays on JAX and
  PyTorch; `batch_rules`: what both share;
* `train_steps`: where the backends differ in training (`tf_step`, `jax_step`,
  `torch_step`); the objective is the methods' own, in `keras.ops`
  (`grad_reverse.backend_ops`);
* `resume`: where a fit starts (the ramp and the batches follow the epoch
  Keras starts at, after a preemption too);
* `optimizers`: own optimizers or learning-rate scales for the feature
  extractor and the adversary;
* `validators`, `validation_scores`: scoring a trained model without target
  labels (source accuracy, entropy, information maximisation, SND, DEV);
  `reverse_validation`: the paper's reverse validation (§5.1.2), a function
  and a validator;
* `validation_callback`: the scores in the epoch's logs, for `ModelCheckpoint`,
  `EarlyStopping` and KerasTuner;
* `selection`: choosing among trained candidates, the plain network among them;
* `keras_compat`: where Keras 2 and Keras 3 differ for the training step and saving.

The schedules over training, the lambda ramp (shared with
`DANNLambdaSchedule`) and the learning rate (`DANNLearningRateSchedule`),
are `grad_reverse.schedule`'s.
"""

from grad_reverse.adaptation.cdan import CDAN
from grad_reverse.adaptation.dann import DANN
from grad_reverse.adaptation.mdd import MDD
from grad_reverse.adaptation.reverse_validation import (
    ReverseValidation,
    ReverseValidator,
    reverse_validation,
    select_by_reverse_validation,
)
from grad_reverse.adaptation.selection import Selection, select_without_labels
from grad_reverse.adaptation.validation_callback import ValidatorCallback
from grad_reverse.adaptation.validators import (
    DEFAULT_VALIDATOR,
    VALIDATORS,
    DeepEmbeddedValidation,
    InformationMaximization,
    PredictionEntropy,
    SoftNeighborhoodDensity,
    SourceAccuracy,
    SourceAccuracyAndAlignment,
    Validator,
)
from grad_reverse.backend_ops import ON_TENSORFLOW
from grad_reverse.schedule import DANNLearningRateSchedule, ScaledLearningRate

__all__ = [
    "CDAN",
    "DANN",
    "MDD",
    "DEFAULT_VALIDATOR",
    "VALIDATORS",
    "DANNLearningRateSchedule",
    "DeepEmbeddedValidation",
    "InformationMaximization",
    "PredictionEntropy",
    "ReverseValidation",
    "ReverseValidator",
    "ScaledLearningRate",
    "Selection",
    "SoftNeighborhoodDensity",
    "SourceAccuracy",
    "SourceAccuracyAndAlignment",
    "Validator",
    "ValidatorCallback",
    "paired_dataset",
    "reverse_validation",
    "select_by_reverse_validation",
    "select_without_labels",
]

# tf.data's batches: TensorFlow only. `__all__` above is a plain list, read as written by the
# API reference's generator, which documents the name for every backend.
if ON_TENSORFLOW:
    from grad_reverse.adaptation.batches import paired_dataset as paired_dataset
else:
    __all__.remove("paired_dataset")
