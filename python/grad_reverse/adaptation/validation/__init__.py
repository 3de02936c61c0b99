"""Choosing a trained model without target labels: the scores, the validators
that compute them from a model's predictions, the callback that writes them
into the epoch's logs, the selection among candidates, and the paper's
reverse validation.

* `outputs`: what the validators read of a model (`model_outputs`), the
  rule that tells a classifier's logits, and the checks of their input;
* `base`: `Validator` (one model) and `PoolValidator` (a pool at once);
* `scores`: the numbers themselves, in numpy, on arrays of probabilities and
  features (no model, no backend);
* `one_model`: each score as a callable on a model and its data
  (`validator(model, x_source, y_source, x_target, from_logits=...)`), the
  model read through its feature extractor and label head only;
* `pool`: `EnsembleValidation`, which scores candidates against each other;
* `scoring`: many validators at once, on one model or on a pool;
* `validators`: the names (`VALIDATORS`, `POOL_VALIDATORS`, the default) and
  `validator`, which turns a name into a validator; every validator and
  scoring function is importable from it too;
* `rule`: the gate-then-MixVal rule (`"gated_mixval"`);
* `callback`: `ValidatorCallback`, the scores in the epoch's logs for
  `ModelCheckpoint`, `EarlyStopping` and KerasTuner;
* `selection`: `select_without_labels`, the plain network always a candidate;
* `reverse_validation`: Ganin et al.'s reverse validation (§5.1.2), which
  trains a model per score.
"""
