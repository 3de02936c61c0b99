"""Where Keras 2 (TensorFlow 2.15, tf-keras) and Keras 3 differ for a custom
`train_step`, in one place.

* Keras 3 scales the loss for mixed precision inside the tape
  (`optimizer.scale_loss`) and applies the gradients itself; Keras 2's
  `optimizer.minimize(loss, vars, tape=tape)` does both (its
  `LossScaleOptimizer` re-enters the tape).
* Keras 2's `compute_loss` updates the `loss` metric itself; Keras 3's
  `train_step` updates `Model._loss_tracker` (a private attribute, present
  from Keras 3.0 to at least 3.15; tested in tests/test_dann_model.py) after
  calling it.
* Keras 3's `compile_from_config` skips a custom `compile()`; `DANN`
  restores its compile arguments itself (`compile_arguments`).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from grad_reverse._keras import KERAS_3, keras


def replicas_in_sync() -> int:
    """Replicas whose gradients the optimizer sums (1 outside tf.distribute)."""
    return tf.distribute.get_strategy().num_replicas_in_sync


def mean_over_replicas(value: tf.Tensor) -> tf.Tensor:
    """`value` averaged over the replicas in sync (itself outside tf.distribute), without gradient:
    CDAN+E normalizes its weights by the whole global batch's, not by each replica's share."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return tf.stop_gradient(context.all_reduce("mean", value))


def loss_for_gradients(model: Any, loss: tf.Tensor) -> tf.Tensor:
    """The loss to differentiate, inside the tape: loss-scaled on Keras 3 under mixed precision."""
    return model.optimizer.scale_loss(loss) if KERAS_3 else loss


def minimize(model: Any, tape: tf.GradientTape, loss: tf.Tensor) -> None:
    """One optimizer step on `model.trainable_variables` from `loss` recorded on `tape`."""
    variables = model.trainable_variables
    if KERAS_3:
        gradients = tape.gradient(loss, variables)
        model.optimizer.apply_gradients(zip(gradients, variables))
    else:
        model.optimizer.minimize(loss, variables, tape=tape)


def apply_per_optimizer(tape: tf.GradientTape, loss: tf.Tensor, groups: list) -> None:
    """One step of each optimizer on its variables, from one gradient of `loss`.

    `groups`: `[(optimizer, variables)]`, each variable in one group. Both
    Keras versions' `apply_gradients` sum the replicas' gradients under
    tf.distribute, as `minimize` does. (No loss scaling: `part_optimizers`
    refuses mixed_float16.)
    """
    variables = [v for _, group in groups for v in group]
    gradients = tape.gradient(loss, variables)
    start = 0
    for optimizer, group in groups:
        optimizer.apply_gradients(zip(gradients[start:start + len(group)], group))
        start += len(group)


def optimizer_built(optimizer: Any) -> bool:
    """Whether `optimizer` has built its state (slots) already."""
    return bool(getattr(optimizer, "built" if KERAS_3 else "_built", False))


def track_label_loss(model: Any, loss: tf.Tensor, batch_size: tf.Tensor) -> None:
    """Records the (per-replica scaled) label loss in the model's `loss` metric."""
    if KERAS_3:
        unscaled = loss * tf.cast(replicas_in_sync(), loss.dtype)
        model._loss_tracker.update_state(unscaled, sample_weight=batch_size)
    # Keras 2: compute_loss (compiled_loss) has updated it already.


def label_loss_tracker(model: Any) -> Any:
    """The metric behind the `loss` log entry (for tests of this module)."""
    if KERAS_3:
        return model._loss_tracker
    return model.compiled_loss.metrics[0]


def compile_arguments(config: dict) -> dict:
    """`get_compile_config()`'s dict back as `compile()` keyword arguments."""
    return keras.saving.deserialize_keras_object(config)


def serialize(obj: Any) -> Any:
    return keras.saving.serialize_keras_object(obj)


def deserialize(config: Any) -> Any:
    return keras.saving.deserialize_keras_object(config)
