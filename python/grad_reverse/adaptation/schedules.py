"""The schedules of the adversarial models (`DANN`, `CDAN`, `MDD`): the two of
Ganin et al. (JMLR 2016), and Transfer-Learning-Library's warm start.

* `lambda_at_step`: the adaptation factor `lambda_p` inside the training
  step, from the step counter and the fit's total steps (a graph op, so it
  is exact per step under `steps_per_execution > 1` and XLA);
  `scheduled_lambda` picks it, a constant, or `warm_start_lambda` (MDD's default);
* `DANNLearningRateSchedule`: the paper's learning-rate decay
  `mu_0 / (1 + alpha * p) ** beta` as a serializable Keras
  `LearningRateSchedule`.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import tensorflow as tf

from grad_reverse._keras import keras


def _finite(name: str, value: float) -> float:
    """`value` as a float; ValueError naming `name` when it is not finite
    (shared by the DANN model's arguments)."""
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    return value


def lambda_at_step(step: tf.Tensor, total_steps: tf.Tensor, gamma: float, lambda_max: float) -> tf.Tensor:
    """`dann_lambda(step / (total_steps - 1), gamma, lambda_max)` as a float32 tensor.

    The same progress as `DANNLambdaSchedule`: the first step of a fit trains
    with 0, its last with ~`lambda_max`; progress is clipped to [0, 1].
    """
    denominator = tf.maximum(tf.cast(total_steps, tf.float32) - 1.0, 1.0)
    progress = tf.clip_by_value(tf.cast(step, tf.float32) / denominator, 0.0, 1.0)
    return lambda_max * (2.0 / (1.0 + tf.exp(-gamma * progress)) - 1.0)


# "paper": the ramp over each fit's progress; "constant": lambda_max throughout;
# "warm_start": Transfer-Learning-Library's WarmStartGradientReverseLayer,
# the same curve over a fixed number of steps, not clipped (MDD's default).
LAMBDA_SCHEDULES = ("paper", "constant", "warm_start")
DEFAULT_WARM_START_STEPS = 1000


def warm_start_lambda(step: tf.Tensor, warm_start_steps: int, gamma: float, lambda_max: float) -> tf.Tensor:
    """`lambda_max * (2 / (1 + exp(-gamma * step / warm_start_steps)) - 1)`: TLlib's warm start
    (alpha = gamma, hi = lambda_max, max_iters = warm_start_steps); it keeps rising towards
    lambda_max after `warm_start_steps`, whatever the fit's length."""
    progress = tf.cast(step, tf.float32) / float(warm_start_steps)
    return lambda_max * (2.0 / (1.0 + tf.exp(-gamma * progress)) - 1.0)


def scheduled_lambda(schedule: str, step: tf.Tensor, total_steps: tf.Tensor, gamma: float, lambda_max: float,
                     warm_start_steps: Optional[int] = None) -> tf.Tensor:
    """Lambda of the step `step` (of `total_steps` in this fit) under `schedule` (float32 tensor)."""
    if schedule == "constant":
        return tf.constant(lambda_max, tf.float32)
    if schedule == "warm_start":
        return warm_start_lambda(step, warm_start_steps or DEFAULT_WARM_START_STEPS, gamma, lambda_max)
    return lambda_at_step(step, total_steps, gamma, lambda_max)


@keras.saving.register_keras_serializable(package="grad_reverse")
class DANNLearningRateSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """`initial_learning_rate / (1 + alpha * p) ** beta`, `p = step / decay_steps` (clipped to 1).

    Ganin et al. (JMLR 2016, §5.2.2) anneal the learning rate this way with
    `mu_0 = 0.01, alpha = 10, beta = 0.75`, `p` being the training progress
    from 0 to 1. `decay_steps` is the number of optimizer steps of the whole
    training (`epochs * steps_per_epoch`); after it the rate stays at
    `initial_learning_rate / (1 + alpha) ** beta`.
    """

    def __init__(
        self,
        initial_learning_rate: float = 0.01,
        decay_steps: int = 1,
        alpha: float = 10.0,
        beta: float = 0.75,
    ) -> None:
        super().__init__()
        self.initial_learning_rate = _finite("initial_learning_rate", initial_learning_rate)
        if isinstance(decay_steps, bool) or not isinstance(decay_steps, int) or decay_steps < 1:
            raise ValueError(f"decay_steps must be an integer of at least 1 (the fit's total steps), got {decay_steps!r}")
        self.decay_steps = decay_steps
        self.alpha = _finite("alpha", alpha)
        self.beta = _finite("beta", beta)

    def __call__(self, step: Any) -> tf.Tensor:
        progress = tf.minimum(tf.cast(step, tf.float32) / float(self.decay_steps), 1.0)
        return self.initial_learning_rate / tf.pow(1.0 + self.alpha * progress, self.beta)

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
    """

    def __init__(self, schedule: Any, scale: float) -> None:
        super().__init__()
        if isinstance(schedule, dict):  # from_config
            schedule = keras.optimizers.schedules.deserialize(schedule)
        if not isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule):
            raise TypeError(f"ScaledLearningRate: schedule must be a Keras LearningRateSchedule, got {schedule!r}")
        self.schedule = schedule
        self.scale = _finite("ScaledLearningRate: scale", scale)

    def __call__(self, step: Any) -> tf.Tensor:
        return self.scale * tf.cast(self.schedule(step), tf.float32)

    def get_config(self) -> dict[str, Any]:
        return {"schedule": keras.optimizers.schedules.serialize(self.schedule), "scale": self.scale}
