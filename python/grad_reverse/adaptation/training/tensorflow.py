"""The adversarial models' training step on TensorFlow: the objective's gradients on a
`tf.GradientTape`, per replica under tf.distribute, with the native GradReverse op inside.

Where Keras 2 and Keras 3 differ inside the step, kept here: Keras 3 scales the loss for
mixed precision inside the tape and applies the gradients itself; Keras 2's
`minimize(tape=)` does both. Keras 2's `compute_loss` updates the `loss` metric; Keras 3's
train_step does it (`AdversarialModel.record_step`).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from grad_reverse._keras import KERAS_3


def loss_for_gradients(model: Any, loss: tf.Tensor) -> tf.Tensor:
    """The loss to differentiate, inside the tape: loss-scaled on Keras 3 under mixed precision."""
    return model.optimizer.scale_loss(loss) if KERAS_3 else loss


def train_step(model: Any, data: Any) -> dict:
    batch = model.unpack_batch(data)
    x_source, x_target, y_source, sample_weight = batch
    lambda_ = model.current_lambda()
    with tf.GradientTape() as tape:
        total, label_loss, y_pred, logs, _ = model.objective(x_source, x_target, y_source, sample_weight, lambda_)
        total = loss_for_gradients(model, total)
    if KERAS_3 or model._part_optimizers():
        # Both Keras versions' apply_gradients sum the replicas' gradients under tf.distribute.
        # (No loss scaling with part optimizers: `part_optimizers` refuses mixed_float16.)
        model.apply_gradients(tape.gradient(total, model.trainable_variables))
    else:
        model.optimizer.minimize(total, model.trainable_variables, tape=tape)
    return model.record_step(label_loss, logs, lambda_, batch, y_pred)
