"""The objective and one training step of an adaptation model: what
`AdversarialModel` (`model`) trains by, as a base class of it. Kept apart from
the model's construction, `compile`, `fit` and saving: this is the arithmetic
of one batch (the lambda schedule's value, the objective's sum, the update of
each optimizer, the metrics), the same on every backend; each backend's
gradients are `training.steps`'.

The methods read what `AdversarialModel` sets up (`METHOD`, the schedule's
state, the parts, the metrics) and what each method defines
(`_adversarial_step`, `_adversarial_weight`)."""

from __future__ import annotations

from typing import Any

from grad_reverse._keras import KERAS_3, keras
from grad_reverse.adaptation.training import steps as train_steps
from grad_reverse.adaptation.training.optimizers import optimizer_groups
from grad_reverse.backend_ops import ops, replicas_in_sync
from grad_reverse.schedule import scheduled_lambda


class AdversarialTraining:
    """The objective and the training step `AdversarialModel` inherits (with
    `keras.Model` after it in the method order, so `test_step`'s `super()` is
    Keras')."""

    def current_lambda(self) -> Any:
        """Lambda of the next training step (float32 tensor)."""
        return scheduled_lambda(
            self.lambda_schedule,
            self._schedule.step,
            self._schedule.total_steps,
            self.gamma,
            self.lambda_max,
            self.warm_start_steps,
        )

    def set_schedule_steps(self, total_steps: int, step: int = 0) -> None:
        """Places the lambda ramp: `total_steps` steps in all, the next step being `step`.

        Args:
          total_steps: the training's optimizer steps in all (>= 1).
          step: the index of the next step (>= 0).

        `fit` calls it (`epochs * steps_per_epoch`, `initial_epoch * steps_per_epoch`);
        a custom training loop calling `train_step` calls it first.
        """
        if int(total_steps) < 1 or int(step) < 0:
            raise ValueError(f"{self.METHOD}: total_steps must be >= 1 and step >= 0, got {total_steps} and {step}")
        self._schedule.total_steps.assign(int(total_steps))
        self._schedule.step.assign(int(step))

    def objective(
        self, x_source: Any, x_target: Any, y_source: Any, sample_weight: Any = None, lambda_: Any = None
    ) -> tuple:
        """`(total, label loss, label output on the source, {metric: value}, features)` of one batch, on
        any backend (the gradients are taken by the backend's step): what `train_step`
        differentiates (per replica under tf.distribute).

        Args:
          x_source: the batch's source points.
          x_target: the batch's target points.
          y_source: the source points' labels.
          sample_weight: the source points' weights, or None.
          lambda_: the gradient reversal factor; default: the schedule's.
        """
        features = self.feature_extractor(ops.concatenate([x_source, x_target], axis=0), training=True)
        return (*self.objective_on_features(features, x_source, y_source, sample_weight, lambda_), features)

    def objective_on_features(
        self, features: Any, x_source: Any, y_source: Any, sample_weight: Any = None, lambda_: Any = None
    ) -> tuple:
        """`objective` from the batch's features (source points first): `(total, label loss, label
        output on the source, {metric: value})`; the gradients reaching the features are the
        feature extractor's.

        Args:
          features: the feature extractor's output on the source points, then the target points.
          x_source: the batch's source points (their count splits `features`).
          y_source: the source points' labels.
          sample_weight: the source points' weights, or None.
          lambda_: the gradient reversal factor; default: the schedule's.
        """
        lambda_ = self.current_lambda() if lambda_ is None else lambda_
        y_pred, adversarial_term, logs = self._adversarial_step(features, ops.shape(x_source)[0], lambda_)
        label_loss = self.compute_loss(x=x_source, y=y_source, y_pred=y_pred, sample_weight=sample_weight)
        # Per replica: the optimizer sums the replicas' gradients.
        scaled_term = adversarial_term / float(replicas_in_sync())
        total = ops.cast(label_loss, "float32") + self._adversarial_weight() * scaled_term
        return total, label_loss, y_pred, logs

    def train_step(self, *args: Any) -> Any:
        """One step on a batch: the objective's gradients by the backend's own means, one update
        of each optimizer, the metrics.

        Args:
          *args: the batch `((x_source, x_target), y_source[, sample_weight])`; on JAX Keras
            passes the state first (`train_step(state, data)`) and gets it back.

        Returns:
          The logs `{metric: value}` (on JAX, `(logs, state)`).
        """
        if not self._compiled_for_adaptation:
            raise RuntimeError(f"{self.METHOD}: compile() the model before training it")
        return train_steps.train_step(self, *args)

    def unpack_batch(self, data: Any) -> tuple:
        """`(x_source, x_target, y_source, sample_weight)` of a training batch, or a ValueError saying
        what a batch must be.

        Args:
          data: the batch, `((x_source, x_target), y_source[, sample_weight])`.
        """
        x, y_source, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        if not (isinstance(x, (tuple, list)) and len(x) == 2):
            raise ValueError(
                f"{self.METHOD}.train_step: a batch must be ((x_source, x_target), y_source); got inputs {x!r}"
            )
        return x[0], x[1], y_source, sample_weight

    def apply_gradients(self, gradients: list) -> None:
        """One step of each optimizer: each part's own optimizer on its variables
        (`part_optimizers`), the model's on the others.

        Args:
          gradients: the objective's gradients of `trainable_variables`, in their order.
        """
        if not self._part_optimizers():
            self.optimizer.apply_gradients(zip(gradients, self.trainable_variables))
            return
        by_variable = {id(v): g for v, g in zip(self.trainable_variables, gradients)}
        for optimizer, group in optimizer_groups(self, self._part_optimizers()):
            optimizer.apply_gradients([(by_variable[id(v)], v) for v in group])

    def record_step(self, label_loss: Any, logs: dict, lambda_: Any, batch: tuple, y_pred: Any) -> dict:
        """After the update: the ramp's step moves on, the metrics take the step's values; the logs.

        Args:
          label_loss: the step's label loss (per replica under tf.distribute).
          logs: the method's `{metric: value}` of the step.
          lambda_: the step's gradient reversal factor.
          batch: the step's `(x_source, x_target, y_source, sample_weight)`.
          y_pred: the label head's output on the source points.
        """
        x_source, _, y_source, sample_weight = batch
        self._schedule.step.assign_add(1)
        if KERAS_3:  # Keras 2's compute_loss (compiled_loss) has updated it already
            unscaled = label_loss * float(replicas_in_sync())
            self._loss_tracker.update_state(unscaled, sample_weight=ops.shape(x_source)[0])
        for name, value in logs.items():
            self._adversarial_metrics.by_name[name].update_state(value)
        self._adversarial_metrics.lambda_.reset_state()
        self._adversarial_metrics.lambda_.update_state(lambda_)
        return self.compute_metrics(x_source, y_source, y_pred, sample_weight=sample_weight)

    def test_step(self, *args: Any) -> Any:
        result = super().test_step(*args)
        logs, state = (result, None) if len(args) == 1 else result  # JAX: (logs, state)
        logs = {k: v for k, v in logs.items() if k not in self.METRIC_NAMES + ("lambda",)}
        return logs if state is None else (logs, state)
