"""Where a fit of `DANN`, `CDAN` or `MDD` starts: the lambda ramp's step and the
batches' position follow the epoch (and batch) Keras starts at.

Keras decides where a fit starts after `fit` was called: its own
`initial_epoch` argument, or later, in `on_train_begin`, a restored training
state (`keras.callbacks.BackupAndRestore` after a preemption). So the model
does not place its ramp and its batches from its arguments alone: a callback
(`StartFollowsKeras`), last in the fit's list, sets both before the fit's
first batch is drawn:

* the ramp's step becomes `epoch * steps run per epoch + batch`, the step
  the uninterrupted fit is at there;
* the model's own batches (`fit(x, y, target=...)`, endless and seeded) are
  drawn through `from_position`, which skips that many batches when the
  iterator starts, so the resumed fit sees the uninterrupted fit's batches.

Keras 3 restarts an interrupted epoch from its first batch (its
BackupAndRestore keeps the epoch, not the batch), with the weights and
optimizer saved mid-epoch: ramp and batches follow that epoch's start, as
they do for a plain Keras model, and a warning says the result is not the
uninterrupted fit's (Keras 2 resumes at the batch after the saved one). A
fit whose optimizer has taken more steps than the start accounts for
(weights and optimizer loaded, `initial_epoch` not passed) gets a warning
too: the position is unknown there, and the ramp is not moved silently.
"""

from __future__ import annotations

import math
import sys
import warnings
from typing import Any

import tensorflow as tf

from grad_reverse._keras import KERAS_3, keras

# Frames of these packages lie between the user's `fit` call and the callback that warns.
_LIBRARY_MODULES = ("grad_reverse", "keras", "tf_keras", "tensorflow", "absl")


def _warn_at_fit_call(message: str) -> None:
    """A UserWarning attributed to the line that called `fit` (the first frame outside the libraries)."""
    level, frame = 2, sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] in _LIBRARY_MODULES:
        level, frame = level + 1, frame.f_back
    warnings.warn(message, UserWarning, stacklevel=level)


def steps_run_per_epoch(steps_per_epoch: int, steps_per_execution: int) -> int:
    """Training steps one epoch runs: Keras 3 runs whole executions of
    `steps_per_execution` steps (the last one past `steps_per_epoch` when it
    does not divide it); Keras 2 cuts the last execution at the epoch's end."""
    if KERAS_3:
        return math.ceil(steps_per_epoch / steps_per_execution) * steps_per_execution
    return steps_per_epoch


def model_steps_per_execution(model: Any) -> int:
    """`compile(steps_per_execution=...)` of `model` (1 when not compiled with it)."""
    if KERAS_3:
        return int(getattr(model, "steps_per_execution", 1) or 1)
    value = getattr(model, "_steps_per_execution", None)
    return int(value.numpy()) if value is not None else 1


def from_position(batches: tf.data.Dataset, position: tf.Variable) -> tf.data.Dataset:
    """`batches` from batch number `position`, read when an iterator starts (not now).

    `fit` hands Keras its dataset before Keras knows the epoch it starts at;
    reading the position inside the dataset's function defers it to the first
    batch drawn, after `StartFollowsKeras` set it. `batches` must be
    deterministic (seeded) for the skipped batches to be the ones an earlier
    process drew.
    """
    return tf.data.Dataset.from_tensors(tf.constant(0, tf.int64)).flat_map(
        lambda _: batches.skip(position.read_value())
    )


class StartFollowsKeras(keras.callbacks.Callback):
    """Places the model's ramp and batches at the first epoch Keras runs (see the module)."""

    def __init__(self, steps_per_epoch: int, position: tf.Variable | None) -> None:
        """`position`: the variable `from_position` reads, or None where the fit's batches
        come from a dataset the model does not position. One callback serves one fit."""
        super().__init__()
        self.steps_per_epoch = int(steps_per_epoch)
        self.position = position
        self._placed = False
        self._epoch = 0

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._epoch = int(epoch)

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        # The fit's first batch: Keras 3 starts an epoch at batch 0; Keras 2
        # (tf-keras) resumes a BackupAndRestore saved mid-epoch at the batch
        # after the saved one. Either way no batch has been drawn yet.
        if self._placed:
            return
        self._placed = True
        model = self.model
        per_epoch = steps_run_per_epoch(self.steps_per_epoch, model_steps_per_execution(model))
        start = self._epoch * per_epoch + int(batch)
        model._schedule.step.assign(start)
        if self.position is not None:
            self.position.assign(start)
        self._warn_where_inexact(model, self._epoch, start)

    def _warn_where_inexact(self, model: Any, epoch: int, start: int) -> None:
        method = model.METHOD
        iterations = int(model.optimizer.iterations.numpy()) if model.optimizer is not None else 0
        first_fit = not getattr(model, "_has_fit", False)
        model._has_fit = True
        if first_fit and iterations > start and start == 0:
            _warn_at_fit_call(
                f"{method}.fit starts its lambda ramp and its batches at step 0, but the optimizer has "
                f"taken {iterations} steps already (weights and optimizer loaded from a checkpoint?). To "
                f"resume that training, pass fit(initial_epoch=<epochs done>) with the same epochs, "
                f"steps_per_epoch and seed, or use keras.callbacks.BackupAndRestore; to train anew from "
                f"these weights with a new ramp, ignore this.",
            )
        elif first_fit and iterations > start:
            _warn_at_fit_call(
                f"{method}.fit resumes at epoch {epoch} (step {start}), but the restored optimizer has "
                f"taken {iterations} steps: the state was saved in the middle of an epoch, and Keras "
                f"restarts that epoch from its first batch with the weights saved mid-epoch. The ramp and "
                f"the batches follow the epoch's start, as in a plain Keras model; the result is not the "
                f"uninterrupted fit's. Save at epoch ends (BackupAndRestore's default save_freq='epoch') "
                f"for a resume that is.",
            )
        if start > 0 and self.position is None:
            _warn_at_fit_call(
                f"{method}.fit resumes at epoch {epoch}: its batches come from a dataset this model does "
                f"not position (a finite dataset, or one given without target=), so they start again from "
                f"the dataset's first. For the uninterrupted fit's batches, pass arrays or datasets of "
                f"points with target= and seed=, or an endless, seeded dataset of batches.",
            )
