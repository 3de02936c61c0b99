"""The adversarial models' training step on JAX.

Keras' JAX trainer compiles `train_step(state, data)` as a pure function: the
state is the values of the model's trainable and other variables, its
optimizer's and its metrics'; the step returns the new values. Here the same
stateful code as on the other backends (`objective`, `apply_gradients`,
`record_step`) runs under `keras.StatelessScope`s that map every variable to
its value in the state, and the objective's gradients are `jax.value_and_grad`
over the trainable values (the reversal inside is `jax.custom_vjp`).

Two parts of a model's state are none of Keras' four: the lambda ramp's step
counter and the parts' own optimizers (`part_optimizers`). `StateCarrier`
holds them as a metric's variables, which Keras passes into the compiled step
and writes back after it like any metric's; it is never reset and logs nothing.
"""

from __future__ import annotations

from typing import Any

import jax
import keras


class StateCarrier(keras.metrics.Metric):
    """The variables of a model's training state Keras' JAX trainer does not pass on its own
    (the schedule's counter, the part optimizers'), as a metric's: carried, never reset, not logged."""

    def __init__(self, variables_of: Any) -> None:
        super().__init__(name="grad_reverse_training_state")
        self._variables_of = variables_of

    @property
    def variables(self) -> list:
        return self._variables_of()

    def update_state(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to update: the step assigns the variables it carries."""

    def reset_state(self) -> None:
        """Not reset with the metrics at each epoch: the counter runs over the whole fit."""

    def result(self) -> dict:
        return {}


def carrier_of(model: Any) -> StateCarrier:
    """The model's `StateCarrier`, made at the first use."""
    carrier = model.__dict__.get("_jax_state_carrier")
    if carrier is None:

        def variables() -> list:
            schedule = [model._schedule.step, model._schedule.total_steps]
            return schedule + [v for optimizer in model._part_optimizers().values() for v in optimizer.variables]

        carrier = StateCarrier(variables)
        object.__setattr__(model, "_jax_state_carrier", carrier)  # not tracked: no weights of the model
    return carrier


def separate_averages(model: Any) -> None:
    """Gives each trainable variable a buffer of its own again after a fit with `use_ema=True`.

    Keras' JAX `fit` ends by assigning each moving average's array to its variable (the
    optimizer's `finalize_variable_values`), so the two variables hold one buffer; the next
    fit's compiled step donates its whole state and fails with "Attempt to donate the same
    buffer twice" (then a TypeError in Keras' `variables.py`). Keras' own bug, seen with a plain
    `keras.Sequential` too (Keras 3.15.1, JAX 0.10.2; docs/troubleshooting.md has the
    reproducer): a copy of each such variable's value, the same numbers, ends the sharing."""
    optimizer = getattr(model, "optimizer", None)
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)  # a LossScaleOptimizer's
    averages = getattr(optimizer, "_model_variables_moving_average", None) or []
    shared = {id(average.value) for average in averages}
    for variable in model.trainable_variables:
        if id(variable.value) in shared:
            variable.assign(keras.ops.copy(variable.value))


def _values(scope: Any, variables: list, before: list) -> list:
    """The variables' values a StatelessScope ended with (their values before where it assigned none)."""
    values = []
    for variable, old in zip(variables, before):
        new = scope.get_current_value(variable)
        values.append(old if new is None else new)
    return values


def train_step(model: Any, state: tuple, data: Any) -> tuple:
    trainable, non_trainable, optimizer_values, metrics_values = state
    trainable_variables = model.trainable_variables
    non_trainable_variables = model.non_trainable_variables
    optimizer_variables = model.optimizer.variables
    metrics_variables = model.metrics_variables
    batch = model.unpack_batch(data)
    x_source, x_target, y_source, sample_weight = batch
    fixed = list(zip(optimizer_variables, optimizer_values)) + list(zip(metrics_variables, metrics_values))

    def loss_and_updates(trainable_values: list, non_trainable_values: list) -> tuple:
        mapping = list(zip(trainable_variables, trainable_values))
        mapping += list(zip(non_trainable_variables, non_trainable_values)) + fixed
        with keras.StatelessScope(state_mapping=mapping) as scope:
            lambda_ = model.current_lambda()
            total, label_loss, y_pred, logs, _ = model.objective(x_source, x_target, y_source, sample_weight, lambda_)
            scaled = model.optimizer.scale_loss(total)
        new_non_trainable = _values(scope, non_trainable_variables, non_trainable_values)
        return scaled, (label_loss, y_pred, logs, lambda_, new_non_trainable)

    gradient_of = jax.value_and_grad(loss_and_updates, has_aux=True)
    (_, (label_loss, y_pred, logs, lambda_, non_trainable)), gradients = gradient_of(trainable, non_trainable)

    every_variable = trainable_variables + non_trainable_variables + optimizer_variables + metrics_variables
    every_value = list(trainable) + list(non_trainable) + list(optimizer_values) + list(metrics_values)
    with keras.StatelessScope(state_mapping=list(zip(every_variable, every_value))) as scope:
        model.apply_gradients(gradients)
        step_logs = model.record_step(label_loss, logs, lambda_, batch, y_pred)
    new_values = _values(scope, every_variable, every_value)
    sizes = [len(trainable), len(non_trainable), len(optimizer_values), len(metrics_values)]
    new_state, start = [], 0
    for size in sizes:
        new_state.append(new_values[start : start + size])
        start += size
    return step_logs, tuple(new_state)
