"""`ValidatorCallback`: validators' scores in the epoch's logs, for Keras' own
model selection (`ModelCheckpoint`, `EarlyStopping`, KerasTuner)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from grad_reverse._keras import keras
from grad_reverse.adaptation.validation.validators import Validator, model_outputs, score_all, validator


class ValidatorCallback(keras.callbacks.Callback):
    """Scores the model at each epoch's end and writes each score into the
    epoch's logs as `val_<name>` (e.g. `val_snd`), higher being better.

        checkpoint = keras.callbacks.ModelCheckpoint(
            "best.keras", monitor="val_snd", mode="max", save_best_only=True)
        model.fit(x, y, target=x_target, epochs=10,
                  callbacks=[ValidatorCallback(["snd", "source_accuracy"], x_val, y_val, x_target), checkpoint])

    List it before the callbacks that read its scores: Keras calls callbacks in
    the list's order, and they see the logs it has written to.

    Args:
      validators: validators or their names (`grad_reverse.adaptation.VALIDATORS`).
      x_source, y_source: held-out labeled source points (not trained on).
      x_target: unlabeled target points (those trained on may be used:
        no target label is read).
      from_logits: whether the label head outputs logits; default: told
        from its last activation.
      prefix: what the logs' keys start with.

    Bad input (too few points, mismatched shapes, a label head without
    probabilities) raises at the fit's start, before the first step.
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
        if isinstance(validators, (str, Validator)):
            validators = [validators]
        self.validators = [validator(v) for v in validators]
        if not self.validators:
            raise ValueError("ValidatorCallback: no validators; accepted: one or more Validators or their names")
        self.x_source, self.y_source, self.x_target = (np.asarray(a) for a in (x_source, y_source, x_target))
        for v in self.validators:
            v.check_sizes(len(self.x_source), len(self.x_target))
        self.from_logits, self.prefix = from_logits, prefix

    def on_train_begin(self, logs: dict | None = None) -> None:
        # The label head's kind and shapes checked on a few points, before the first step.
        few = slice(0, 8)
        model_outputs(
            "ValidatorCallback",
            self.model,
            self.x_source[few],
            self.y_source[few],
            self.x_target[few],
            self.from_logits,
        )

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

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if logs is not None:
            logs.update(self.scores())
