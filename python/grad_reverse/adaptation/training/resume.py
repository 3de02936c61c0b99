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
  drawn from that batch on, so the resumed fit sees the uninterrupted fit's
  batches: on TensorFlow through `batches.from_position`, which skips that
  many batches when the iterator starts; elsewhere `array_batches.PairedBatches`
  draws each batch by its number, told at every epoch's start.

Keras 3 restarts an interrupted epoch from its first batch (its
BackupAndRestore keeps the epoch, not the batch), with the weights and
optimizer saved mid-epoch: ramp and batches follow that epoch's start, as
they do for a plain Keras model, and a warning says the result is not the
uninterrupted fit's (Keras 2 resumes at the batch after the saved one). A
fit whose optimizer has taken more steps than the start accounts for
(weights and optimizer loaded, `initial_epoch` not passed) gets a warning
too: the position is unknown there, and the ramp is not moved silently.

A resume must run the same fit (`epochs`, `steps_per_epoch`): the ramp
spans the fit's steps, so another plan moves lambda at the resume. The fit's
plan is saved with the weights while the fit runs (Keras 3: BackupAndRestore,
ModelCheckpoint, `save_weights` and `.keras` files written during the fit),
and a resume whose plan differs from the restored one warns, naming both.
Without a saved plan (Keras 2, or a checkpoint written by an older release),
an optimizer restored with fewer steps than the resumed epoch starts at
says the same. Epochs in messages count from 1, as Keras' progress bar does.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import warnings
from typing import Any

import numpy as np

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


# The key under which a fit's plan is kept beside the model's own variables in a weights file.
PLAN_KEY = "grad_reverse_fit_plan"


@dataclasses.dataclass(frozen=True)
class FitPlan:
    """A fit's `epochs` and `steps_per_epoch` (as `fit` was given them, or computed the steps)."""

    epochs: int
    steps_per_epoch: int

    def __str__(self) -> str:
        return (
            f"epochs={self.epochs}, steps_per_epoch={self.steps_per_epoch} ({self.epochs * self.steps_per_epoch} steps)"
        )


def save_plan(model: Any, store: Any) -> None:
    """Keeps the running fit's plan in a weights `store` (from `save_own_variables`; none between fits)."""
    plan = getattr(model, "_running_plan", None)
    if plan is not None:
        store[PLAN_KEY] = np.asarray([plan.epochs, plan.steps_per_epoch], np.int64)


class _WithoutPlan:
    """A weights store as Keras' `load_own_variables` expects it: the plan's key left out."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def keys(self) -> list:
        return [key for key in self._store.keys() if key != PLAN_KEY]  # noqa: SIM118 (a store, not a dict)

    def __getitem__(self, key: str) -> Any:
        return self._store[key]


def load_plan(model: Any, store: Any) -> Any:
    """Reads a saved plan from a weights `store` into `model._restored_plan` (None when it holds none);
    returns the store without the plan, for Keras' own loading."""
    if PLAN_KEY not in list(store.keys()):
        model._restored_plan = None
        return store
    epochs, steps = (int(v) for v in np.asarray(store[PLAN_KEY]))
    model._restored_plan = FitPlan(epochs, steps)
    return _WithoutPlan(store)


class StartFollowsKeras(keras.callbacks.Callback):
    """Places the model's ramp and batches at the first epoch Keras runs (see the module)."""

    def __init__(self, steps_per_epoch: int, position: Any, epochs: int = 1) -> None:
        """`position`: what the fit's batches start from (`assign(batch number)`): the variable
        `batches.from_position` reads, `PairedBatches` (told at every epoch), or None where the
        fit's batches come from a dataset the model does not position. One callback serves one fit."""
        super().__init__()
        self.steps_per_epoch = int(steps_per_epoch)
        self.position = position
        # `PairedBatches` (JAX, PyTorch) is told every epoch's first batch number; a tf.data
        # position variable, once, where the fit starts.
        self._by_epoch = getattr(position, "follows_epochs", False)
        self.plan = FitPlan(int(epochs), int(steps_per_epoch))
        self._placed = False
        self._epoch = 0

    def on_train_begin(self, logs: dict | None = None) -> None:
        # From here on, weights saved (by the fit's callbacks) carry this fit's plan.
        self.model._running_plan = self.plan

    def on_train_end(self, logs: dict | None = None) -> None:
        self.model._running_plan = None

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._epoch = int(epoch)
        if self._by_epoch:  # drawn by number, from each epoch's start
            self.position.assign(self._epoch * self.steps_per_epoch)

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        # The fit's first batch: Keras 3 starts an epoch at batch 0; Keras 2
        # (tf-keras) resumes a BackupAndRestore saved mid-epoch at the batch
        # after the saved one. Either way no batch has been drawn yet.
        if self._placed:
            return
        self._placed = True
        model = self.model
        per_epoch = (
            self.steps_per_epoch  # batches of a known length: Keras runs that many
            if self._by_epoch
            else steps_run_per_epoch(self.steps_per_epoch, model_steps_per_execution(model))
        )
        start = self._epoch * per_epoch + int(batch)
        model._schedule.step.assign(start)
        if self.position is not None and not self._by_epoch:
            self.position.assign(start)
        self._warn_where_inexact(model, self._epoch, start)

    def _warn_where_inexact(self, model: Any, epoch: int, start: int) -> None:
        method = model.METHOD
        iterations = int(model.optimizer.iterations.numpy()) if model.optimizer is not None else 0
        first_fit = not getattr(model, "_has_fit", False)
        model._has_fit = True
        restored_plan = getattr(model, "_restored_plan", None)
        model._restored_plan = None  # compared once, by the fit that follows the restore
        shown = epoch + 1  # as Keras' progress bar numbers it ("Epoch 3/6")
        if start > 0 and restored_plan is not None and restored_plan != self.plan:
            _warn_at_fit_call(
                f"{method}.fit resumes at epoch {shown} with {self.plan}, but the restored state was saved "
                f"by a fit with {restored_plan}: the lambda ramp spans the fit's steps, so lambda jumps at "
                f"the resume and the result is neither fit's. To resume the saved fit, pass "
                f"epochs={restored_plan.epochs} and steps_per_epoch={restored_plan.steps_per_epoch}; to train on with "
                f"another plan, start a new fit (initial_epoch=0, no BackupAndRestore state) from these weights.",
            )
        elif first_fit and iterations > start and start == 0:
            _warn_at_fit_call(
                f"{method}.fit starts its lambda ramp and its batches at step 0, but the optimizer has "
                f"taken {iterations} steps already (weights and optimizer loaded from a checkpoint?). To "
                f"resume that training, pass fit(initial_epoch=<epochs done>) with the same epochs, "
                f"steps_per_epoch and seed, or use keras.callbacks.BackupAndRestore; to train anew from "
                f"these weights with a new ramp, ignore this.",
            )
        elif first_fit and iterations > start:
            _warn_at_fit_call(
                f"{method}.fit resumes at epoch {shown} (step {start}), but the restored optimizer has "
                f"taken {iterations} steps: the state was saved in the middle of an epoch, and Keras "
                f"restarts that epoch from its first batch with the weights saved mid-epoch. The ramp and "
                f"the batches follow the epoch's start, as in a plain Keras model; the result is not the "
                f"uninterrupted fit's. Save at epoch ends (BackupAndRestore's default save_freq='epoch') "
                f"for a resume that is.",
            )
        elif first_fit and 0 < iterations < start:
            _warn_at_fit_call(
                f"{method}.fit resumes at epoch {shown} (step {start} with {self.plan}), but the restored "
                f"optimizer has taken {iterations} steps: the saved fit ran fewer steps per epoch, so "
                f"lambda jumps at the resume and the result is not the saved fit's. To resume it, pass "
                f"the epochs and steps_per_epoch it was started with.",
            )
        if start > 0 and self.position is None:
            _warn_at_fit_call(
                f"{method}.fit resumes at epoch {shown}: its batches come from a dataset this model does "
                f"not position (a finite dataset, or one given without target=), so they start again from "
                f"the dataset's first. For the uninterrupted fit's batches, pass arrays or datasets of "
                f"points with target= and seed=, or an endless, seeded dataset of batches.",
            )
