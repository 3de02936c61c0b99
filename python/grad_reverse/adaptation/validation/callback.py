"""`ValidatorCallback`: validators' scores in the epoch's logs, for Keras' own
model selection (`ModelCheckpoint`, `EarlyStopping`, KerasTuner)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from grad_reverse._keras import KERAS_3, keras
from grad_reverse.adaptation.validation import scores
from grad_reverse.adaptation.validation.base import Validator
from grad_reverse.adaptation.validation.outputs import as_array_points, check_labels, model_outputs
from grad_reverse.adaptation.validation.validators import score_all, validator


class ValidatorCallback(keras.callbacks.Callback):
    """Scores the model at each epoch's end and writes each score into the
    epoch's logs as `val_<name>` (e.g. `val_snd`), higher being better.

        checkpoint = keras.callbacks.ModelCheckpoint(
            "best.keras", monitor="val_snd", mode="max", save_best_only=True)
        model.fit(x, y, target=x_target, epochs=10,
                  callbacks=[ValidatorCallback(["snd", "source_accuracy"], x_val, y_val, x_target), checkpoint])

    List it before the callbacks that read its scores: Keras calls callbacks in
    the list's order, and they see the logs it has written to.

    **The weights the fit ends with.** With an optimizer that averages the
    weights (`use_ema=True`), `fit` trains the raw weights and ends by
    putting the average in their place. So that the score is the score of
    what the fit would end with at that epoch, and so that a checkpoint
    saved after it holds those weights, at each epoch's end this callback
    puts the average into the model (and leaves it there for the callbacks
    after it: `ModelCheckpoint` saves it), and at the next epoch's start
    puts the raw weights back for training: Keras'
    `SwapEMAWeights(swap_on_epoch=True)` for this callback and those after
    it, which it replaces (do not list both). The raw weights wait in a
    copy in memory (one copy of the trainable weights); the average stays
    in the optimizer too, so a fit stopped early (`EarlyStopping`) ends
    with it, as Keras ends it. List `BackupAndRestore` before this callback,
    so that it saves the raw weights that training continues from.

    Args:
      validators: validators or their names (`grad_reverse.adaptation.VALIDATORS`);
        a pool validator (`EnsembleValidation`) is refused: it scores no model alone.
      x_source, y_source: held-out labeled source points (not trained on);
        labels are class numbers `[points]` or `[points, 1]`, or one-hot rows.
      x_target: unlabeled target points (those trained on may be used:
        no target label is read).
      from_logits: whether the label head outputs logits; default: told
        from the model (`outputs.label_from_logits`).
      prefix: what the logs' keys start with.

    Bad input raises before the first training step: every point and label
    checked at construction (arrays of numbers, finite, as many labels as
    points, labels class numbers or one-hot rows, points of one shape, enough
    for each validator), and at the fit's start the label head (a
    classifier's) and every label's range (below the head's class count).
    """

    def __init__(
        self,
        validators: Iterable[Any],
        x_source: Any,
        y_source: Any,
        x_target: Any,
        *,
        from_logits: bool | None = None,
        prefix: str = "val_",
    ):
        super().__init__()
        who = "ValidatorCallback"
        if isinstance(validators, (str, Validator)):
            validators = [validators]
        self.validators = [validator(v, who=who, pool=False) for v in validators]
        if not self.validators:
            raise ValueError(
                f"{who}: no validators; accepted: one or more Validators or their names (VALIDATORS' keys)"
            )
        self.x_source = as_array_points(who, "x_source", x_source)
        self.x_target = as_array_points(who, "x_target", x_target)
        self.y_source = check_labels(who, y_source, len(self.x_source), self.x_source.shape)
        if self.x_source.shape[1:] != self.x_target.shape[1:]:
            raise ValueError(
                f"{who}: x_source and x_target must have points of the same shape, got "
                f"{self.x_source.shape[1:]} and {self.x_target.shape[1:]}"
            )
        for v in self.validators:
            v.check_sizes(len(self.x_source), len(self.x_target))
        self.from_logits, self.prefix = from_logits, prefix
        self._raw_weights = None

    def on_train_begin(self, logs: dict | None = None) -> None:
        # The label head's kind on a few points, then every label's range: before the first step.
        few = slice(0, 8)
        outputs = model_outputs(
            "ValidatorCallback",
            self.model,
            self.x_source[few],
            self.y_source[few],
            self.x_target[few],
            self.from_logits,
        )
        scores.class_labels("ValidatorCallback", self.y_source, outputs.source_probabilities.shape[1])
        self._raw_weights = None

    def scores(self) -> dict:
        """`{logged name: score}` of the model as it is now."""
        found = score_all(
            "ValidatorCallback",
            self.validators,
            self.model,
            self.x_source,
            self.y_source,
            self.x_target,
            self.from_logits,
        )
        return {self.prefix + name: value for name, value in found.items()}

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        if self._raw_weights is not None:  # training goes on from the raw weights
            for variable, value in zip(self._raw_weights[0], self._raw_weights[1]):
                variable.assign(value)
            self._raw_weights = None

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self._put_average_in()
        if logs is not None:
            logs.update(self.scores())

    def _put_average_in(self) -> None:
        """With EMA: the raw weights copied aside, the average put in their place."""
        pairs = ema_pairs(self.model)
        if not pairs:
            return
        variables = [v for v, _ in pairs]
        self._raw_weights = (variables, [_numpy(v) for v in variables])
        for variable, average in pairs:
            variable.assign(_numpy(average))


def _numpy(variable: Any) -> np.ndarray:
    """A copy of a variable's value, on every backend (Keras 2: a tf.Variable)."""
    return np.array(keras.ops.convert_to_numpy(variable) if KERAS_3 else variable.numpy())


def ema_pairs(model: Any) -> list:
    """`[(trainable variable, its moving average)]` when the model's optimizer
    averages the weights (`use_ema=True`), else `[]`. The model's optimizer
    is the one `fit` finalizes: it averages every trainable weight (the
    parts' own optimizers included; see `training.optimizers`)."""
    optimizer = getattr(model, "optimizer", None)
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)  # a LossScaleOptimizer's
    if not getattr(optimizer, "use_ema", False):
        return []
    averages = getattr(optimizer, "_model_variables_moving_average", None)
    if not averages:
        return []  # not built yet: no step taken
    variables = getattr(optimizer, "_trainable_variables", None)
    if variables is not None:  # Keras 3: the averages in the order of the variables it was built on
        return list(zip(variables, averages))
    # Keras 2's optimizer: each average found by its variable's key.
    index, key = optimizer._index_dict, optimizer._var_key
    return [(v, averages[index[key(v)]]) for v in model.trainable_variables if key(v) in index]
