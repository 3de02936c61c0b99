"""A short, self-checking example: forward is the identity, backward is -lambda*dy."""

from __future__ import annotations

import tensorflow as tf

import grad_reverse


def run() -> None:
    x = tf.constant([[1.0, -2.0, 3.0]])
    lambda_ = tf.Variable(0.5)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = grad_reverse.grad_reverse(x, lambda_)
        loss = tf.reduce_sum(3.0 * y)
    dx = tape.gradient(loss, x)
    print("x            ", x.numpy().tolist())
    print("forward y    ", y.numpy().tolist(), "(identity)")
    print("dloss/dy     ", [[3.0, 3.0, 3.0]])
    print("dloss/dx     ", dx.numpy().tolist(), f"(= -{lambda_.numpy()} * dloss/dy)")
    tf.debugging.assert_equal(y, x)
    tf.debugging.assert_equal(dx, tf.fill(x.shape, -1.5))
