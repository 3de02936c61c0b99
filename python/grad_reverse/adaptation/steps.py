"""One training step's pieces, shared by `DANN`, `CDAN` and `MDD` (`model.AdversarialModel.train_step`):
the loss to differentiate, the optimizers' updates, the label loss metric.

Keras 2 and Keras 3 differ inside the step, so the difference is kept here,
beside it: Keras 3 scales the loss for mixed precision inside the tape and
applies the gradients itself; Keras 2's `minimize(tape=)` does both. Keras
2's `compute_loss` updates the `loss` metric; Keras 3's train_step does it.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from grad_reverse._keras import KERAS_3


def replicas_in_sync() -> int:
    """Replicas whose gradients the optimizer sums (1 outside tf.distribute)."""
    return tf.distribute.get_strategy().num_replicas_in_sync


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
        optimizer.apply_gradients(zip(gradients[start : start + len(group)], group))
        start += len(group)


def track_label_loss(model: Any, loss: tf.Tensor, batch_size: tf.Tensor) -> None:
    """Records the (per-replica scaled) label loss in the model's `loss` metric."""
    if KERAS_3:
        unscaled = loss * tf.cast(replicas_in_sync(), loss.dtype)
        model._loss_tracker.update_state(unscaled, sample_weight=batch_size)
    # Keras 2: compute_loss (compiled_loss) has updated it already.
