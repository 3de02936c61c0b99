"""The schedules over training: the gradient reversal factor lambda (one ramp,
three uses) and the learning rate.

`ramp` is the adaptation-factor curve of Ganin et al. (JMLR 2016),
`lambda_max * (2 / (1 + exp(-gamma * p)) - 1)`; the others build on it:

* `dann_lambda`: the ramp as a Python float, its arguments checked;
* `DANNLambdaSchedule`: a Keras callback that assigns a lambda variable
  before every training batch (for `GradReverse(lambda_=variable)`);
* `lambda_at_step`, `warm_start_lambda`, `scheduled_lambda`: the ramp as a
  float32 tensor inside a training step (`grad_reverse.DANN`, `CDAN`, `MDD`),
  from a step counter, so it is exact per step under `steps_per_execution > 1`
  and XLA; `ScheduleState` holds that counter;
* `DANNLearningRateSchedule`: the paper's learning-rate decay, and
  `ScaledLearningRate`, another schedule scaled (a part's own rate in
  `compile(part_optimizers=...)`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from grad_reverse._keras import keras
from grad_reverse.backend_ops import ON_TENSORFLOW, ops, rank

_FLOAT32_MAX = float(np.finfo(np.float32).max)

# A tf.Variable (TensorFlow) or a keras.Variable (Keras 3, any backend).
VariableLike = Any


def finite(name: str, value: float) -> float:
    """`value` as a float (the models' number arguments): a TypeError naming `name` when it is no
    real number (a string, a bool, None), a ValueError when it is not finite."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.ndarray, np.generic)):
        raise TypeError(f"{name} must be a real number (an int or a float), got {type(value).__name__} {value!r}")
    if np.ndim(value) != 0 or not np.issubdtype(np.asarray(value).dtype, np.number):
        raise TypeError(f"{name} must be a real number (an int or a float), got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    return value


def whole(name: str, value: int, minimum: int) -> int:
    """`value` as an int (epochs, steps): a TypeError naming `name` when it is no integer (a
    string, a bool, a float), a ValueError when it is below `minimum`."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{name} must be an integer >= {minimum}, got {type(value).__name__} {value!r}")
    if int(value) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def ramp(progress: Any, gamma: float, lambda_max: float, exp: Callable[[Any], Any] = math.exp) -> Any:
    """`lambda_max * (2 / (1 + exp(-gamma * progress)) - 1)`: 0 at progress 0, rising towards `lambda_max`.

    `exp` is `math.exp` for a Python float, `ops.exp` for a tensor; callers
    clip `progress` (or not: the warm start keeps rising past 1).
    """
    return lambda_max * (2.0 / (1.0 + exp(-gamma * progress)) - 1.0)


def dann_lambda(progress: float, gamma: float = 10.0, lambda_max: float = 1.0) -> float:
    """`lambda_max * (2 / (1 + exp(-gamma * p)) - 1)` for training progress `p`.

    Ganin et al. (JMLR 2016) ramp the gradient reversal coefficient from 0 to 1
    this way so that the domain classifier's noisy early gradients do not
    disturb the feature extractor before the label task is learned. `progress`
    is clipped to [0, 1]; the value rises monotonically from 0 at p = 0 to
    `lambda_max * 0.99991` at p = 1 (gamma = 10).

    Args:
      progress: the training progress p, from 0 (start) to 1 (end).
      gamma: how steep the ramp is (10, the paper's).
      lambda_max: the value the ramp approaches at p = 1.

    Raises ValueError for a non-finite `progress`, a `gamma` that is not a
    finite number >= 0, or a `lambda_max` not finite in float32 (the lambda
    variable's type): with those the value is always finite.
    """
    _check_ramp(gamma, lambda_max)
    if not math.isfinite(progress):
        raise ValueError(f"progress must be finite, got {progress}")
    return ramp(min(max(float(progress), 0.0), 1.0), gamma, lambda_max)


def _check_variable(variable: Any) -> Any:
    """`variable` if the callback can assign it before every batch (checked here, not at the first `fit`)."""
    dtype = getattr(variable, "dtype", None)
    shape = getattr(variable, "shape", None)
    if not callable(getattr(variable, "assign", None)) or "float" not in getattr(dtype, "name", str(dtype)):
        raise TypeError(
            f"DANNLambdaSchedule: variable must be a scalar float tf.Variable or keras.Variable (the one "
            f"passed to GradReverse(lambda_=variable)), got {type(variable).__name__} {variable!r}; e.g. "
            "lambda_ = tf.Variable(0.0); GradReverse(lambda_=lambda_); DANNLambdaSchedule(lambda_)"
        )
    if shape is not None and rank(shape) not in (0, None):
        raise ValueError(f"DANNLambdaSchedule: variable must be a scalar (one lambda), got shape {shape}")
    return variable


def _check_ramp(gamma: float, lambda_max: float) -> None:
    """The arguments for which every value of the ramp is a finite float32."""
    if not (math.isfinite(gamma) and gamma >= 0):
        # A negative gamma also overflows math.exp for large -gamma * p.
        raise ValueError(f"gamma must be a finite number >= 0, got {gamma}")
    if not abs(lambda_max) <= _FLOAT32_MAX:  # False for NaN too
        raise ValueError(f"lambda_max must be finite in float32, got {lambda_max}")


# "paper": the ramp over each fit's progress; "constant": lambda_max throughout;
# "warm_start": Transfer-Learning-Library's WarmStartGradientReverseLayer,
# the same curve over a fixed number of steps, not clipped (MDD's default).
LAMBDA_SCHEDULES = ("paper", "constant", "warm_start")
DEFAULT_WARM_START_STEPS = 1000


def lambda_at_step(step: Any, total_steps: Any, gamma: float, lambda_max: float) -> Any:
    """`dann_lambda(step / (total_steps - 1), gamma, lambda_max)` as a float32 tensor.

    The same progress as `DANNLambdaSchedule`: the first step of a fit trains
    with 0, its last with ~`lambda_max`; progress is clipped to [0, 1].
    """
    denominator = ops.maximum(ops.cast(total_steps, "float32") - 1.0, 1.0)
    progress = ops.clip(ops.cast(step, "float32") / denominator, 0.0, 1.0)
    return ramp(progress, gamma, lambda_max, ops.exp)


def warm_start_lambda(step: Any, warm_start_steps: int, gamma: float, lambda_max: float) -> Any:
    """The ramp at progress `step / warm_start_steps`, not clipped: TLlib's warm start
    (alpha = gamma, hi = lambda_max, max_iters = warm_start_steps); it keeps rising towards
    lambda_max after `warm_start_steps`, whatever the fit's length."""
    return ramp(ops.cast(step, "float32") / float(warm_start_steps), gamma, lambda_max, ops.exp)


def scheduled_lambda(
    schedule: str,
    step: Any,
    total_steps: Any,
    gamma: float,
    lambda_max: float,
    warm_start_steps: int | None = None,
) -> Any:
    """Lambda of the step `step` (of `total_steps` in this fit) under `schedule` (float32 tensor)."""
    if schedule == "constant":
        return ops.convert_to_tensor(lambda_max, "float32")
    if schedule == "warm_start":
        return warm_start_lambda(step, warm_start_steps or DEFAULT_WARM_START_STEPS, gamma, lambda_max)
    return lambda_at_step(step, total_steps, gamma, lambda_max)


def check_schedule(method: str, lambda_schedule: str, warm_start_steps: int | None) -> tuple:
    """`(lambda_schedule, warm_start_steps)` checked for a model's constructor; ValueError naming `method`."""
    if lambda_schedule not in LAMBDA_SCHEDULES:
        raise ValueError(f"{method}: lambda_schedule must be one of {LAMBDA_SCHEDULES}, got {lambda_schedule!r}")
    if warm_start_steps is None:
        return lambda_schedule, None
    return lambda_schedule, whole(f"{method}: warm_start_steps", warm_start_steps, 1)


class ScheduleState:
    """A model's position on its ramp: the global step, and the ramp's length in steps.

    A plain holder, so Keras tracks neither variable: they are not weights
    of the model (not saved, not in `get_weights()`), and `fit` sets them.
    On TensorFlow they are tf.Variables that move once per step under
    tf.distribute; on JAX and PyTorch keras.Variables (int32: JAX's integers
    without x64), which JAX's step carries (`training.jax.StateCarrier`).
    """

    def __init__(self) -> None:
        if not ON_TENSORFLOW:
            self.step = keras.Variable(0, dtype="int32", trainable=False, name="dann_step")
            self.total_steps = keras.Variable(1, dtype="int32", trainable=False, name="dann_total_steps")
            return
        import tensorflow as tf

        # ONLY_FIRST_REPLICA: every replica runs the step; the counter moves once.
        self.step = tf.Variable(
            0, dtype=tf.int64, trainable=False, name="dann_step", aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA
        )
        self.total_steps = tf.Variable(
            1,
            dtype=tf.int64,
            trainable=False,
            name="dann_total_steps",
            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
        )


class DANNLambdaSchedule(keras.callbacks.Callback):
    """Assigns `variable` the DANN schedule value before every training batch.

    `lambda_p = lambda_max * (2 / (1 + exp(-gamma * p)) - 1)`, where `p` is the
    progress of the current `fit`: `p = step / (total_steps - 1)`, so the first
    batch trains with 0 and the last with ~`lambda_max`. `total_steps` is
    `epochs * steps_per_epoch` of the fit (resuming with `initial_epoch`
    continues the ramp where it left off) unless given explicitly, which a fit
    whose steps per epoch Keras cannot know (a dataset of unknown length without
    `steps_per_epoch`) requires.

    Pass the same variable to `grad_reverse.GradReverse(lambda_=variable)`: the
    op reads lambda as an input, so each assignment takes effect at the next
    step without retracing the train function. The value is also added to the
    logs as `"lambda"` (shown by the progress bar and kept in `History`), and
    kept in the `value` attribute.

    Args:
      variable: a scalar float `tf.Variable` or `keras.Variable`.
      gamma: steepness of the ramp (10 in the paper).
      lambda_max: the final value the schedule approaches (1 in the paper).
      total_steps: number of training steps the ramp spans; defaults to the
        fit's `epochs * steps`.

    With `compile(steps_per_execution=N)`, Keras calls the callback once per N
    steps, so lambda changes every N steps. It works the same on Keras' JAX
    and PyTorch backends (on JAX it syncs the model's state before assigning).

    The schedule never assigns a non-finite lambda: the constructor refuses
    arguments that would (ValueError), since under XLA the op cannot check a
    variable's value at run time (see `grad_reverse.grad_reverse`).
    """

    def __init__(
        self,
        variable: VariableLike,
        gamma: float = 10.0,
        lambda_max: float = 1.0,
        total_steps: int | None = None,
    ) -> None:
        super().__init__()
        if total_steps is not None and total_steps < 1:
            raise ValueError(f"total_steps must be at least 1, got {total_steps}")
        _check_ramp(float(gamma), float(lambda_max))
        self.variable = _check_variable(variable)
        self.gamma = float(gamma)
        self.lambda_max = float(lambda_max)
        self.total_steps = total_steps
        self.value = 0.0  # the value last assigned
        self._steps_per_epoch: int | None = None
        self._total = 1
        self._epoch_start = 0  # global step of the current epoch's first batch
        self._seen = 0  # steps finished in this fit

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        params = self.params or {}
        self._steps_per_epoch = params.get("steps")
        total = self.total_steps
        if total is None:
            epochs = params.get("epochs")
            if self._steps_per_epoch is None or epochs is None:
                raise ValueError(
                    "DANNLambdaSchedule: this fit does not know its number of steps per epoch "
                    "(a dataset of unknown length without steps_per_epoch); pass total_steps="
                )
            total = epochs * self._steps_per_epoch
        self._total = total
        self._seen = 0

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        # With a known epoch length the global step follows from the epoch
        # index (so initial_epoch resumes the ramp); otherwise count steps.
        if self._steps_per_epoch is not None:
            self._epoch_start = epoch * self._steps_per_epoch
        else:
            self._epoch_start = self._seen

    def progress(self, batch: int) -> float:
        """Training progress p in [0, 1] at step `batch` of the current epoch.

        Args:
          batch: the step's index within the epoch, as Keras passes it to
            `on_train_batch_begin`.
        """
        return min((self._epoch_start + batch) / max(self._total - 1, 1), 1.0)

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self.value = dann_lambda(self.progress(batch), self.gamma, self.lambda_max)
        # On JAX, Keras' fit keeps the variables' values outside them inside an epoch: written
        # back first, the assignment is what the next step reads (without it, it would be lost).
        sync = getattr(self.model, "jax_state_sync", None)
        if sync is not None:
            sync()
        self.variable.assign(self.value)

    def _add_to_logs(self, logs: dict[str, Any] | None) -> None:
        if logs is not None:
            logs["lambda"] = self.value

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._seen = self._epoch_start + batch + 1
        self._add_to_logs(logs)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._add_to_logs(logs)


@keras.saving.register_keras_serializable(package="grad_reverse")
class DANNLearningRateSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """`initial_learning_rate / (1 + alpha * p) ** beta`, `p = step / decay_steps` (clipped to 1).

    Ganin et al. (JMLR 2016, §5.2.2) anneal the learning rate this way with
    `mu_0 = 0.01, alpha = 10, beta = 0.75`, `p` being the training progress
    from 0 to 1. `decay_steps` is the number of optimizer steps of the whole
    training (`epochs * steps_per_epoch`); after it the rate stays at
    `initial_learning_rate / (1 + alpha) ** beta`.

    Args:
      initial_learning_rate: the rate at step 0 (`mu_0`).
      decay_steps: the optimizer steps of the whole training, an integer >= 1.
      alpha: how far the rate falls (10, the paper's).
      beta: how fast it falls (0.75, the paper's).

    Calling it with an optimizer step returns that step's learning rate.
    """

    def __init__(
        self,
        initial_learning_rate: float = 0.01,
        decay_steps: int = 1,
        alpha: float = 10.0,
        beta: float = 0.75,
    ) -> None:
        super().__init__()
        self.initial_learning_rate = finite("initial_learning_rate", initial_learning_rate)
        if isinstance(decay_steps, bool) or not isinstance(decay_steps, int) or decay_steps < 1:
            raise ValueError(
                f"decay_steps must be an integer of at least 1 (the fit's total steps), got {decay_steps!r}"
            )
        self.decay_steps = decay_steps
        self.alpha = finite("alpha", alpha)
        self.beta = finite("beta", beta)

    def __call__(self, step: Any) -> Any:
        progress = ops.minimum(ops.cast(step, "float32") / float(self.decay_steps), 1.0)
        return self.initial_learning_rate / ops.power(1.0 + self.alpha * progress, self.beta)

    def get_config(self) -> dict[str, Any]:
        return {
            "initial_learning_rate": self.initial_learning_rate,
            "decay_steps": self.decay_steps,
            "alpha": self.alpha,
            "beta": self.beta,
        }


@keras.saving.register_keras_serializable(package="grad_reverse")
class ScaledLearningRate(keras.optimizers.schedules.LearningRateSchedule):
    """`scale * schedule(step)`: another schedule's learning rate, scaled.

    `DANN.compile(part_optimizers={"feature_extractor": 0.1})` gives the
    feature extractor a copy of the model's optimizer whose learning rate
    is a tenth of the model's at every step; when that rate is a schedule
    (`DANNLearningRateSchedule`), the copy's is this wrapper of it.

    Args:
      schedule: the Keras `LearningRateSchedule` to scale (or its
        serialized config).
      scale: the finite factor its rate is multiplied by.
    """

    def __init__(self, schedule: Any, scale: float) -> None:
        super().__init__()
        if isinstance(schedule, dict):  # from_config
            schedule = keras.optimizers.schedules.deserialize(schedule)
        if not isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule):
            raise TypeError(f"ScaledLearningRate: schedule must be a Keras LearningRateSchedule, got {schedule!r}")
        self.schedule = schedule
        self.scale = finite("ScaledLearningRate: scale", scale)

    def __call__(self, step: Any) -> Any:
        return self.scale * ops.cast(self.schedule(step), "float32")

    def get_config(self) -> dict[str, Any]:
        return {"schedule": keras.optimizers.schedules.serialize(self.schedule), "scale": self.scale}
