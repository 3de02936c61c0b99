"""The pure-Python gradient reversal layer people write today, with lambda.

`tf.custom_gradient` around `tf.identity`. It
is the oracle of the tests and the baseline of the benchmarks. Its backward
rounds exactly like the native kernels: `lambda` is a float32, float and
double multiply by `-lambda` in their own type, half and bfloat16 multiply in
float32 and round once.
"""

from __future__ import annotations

import tensorflow as tf

_VIA_FLOAT32 = (tf.float16, tf.bfloat16)


def reverse_gradient(dy: tf.Tensor, lambda_: tf.Tensor) -> tf.Tensor:
    """`-lambda_ * dy` with the native kernels' rounding (lambda_ a float32 scalar)."""
    scale = -tf.cast(lambda_, tf.float32)
    if dy.dtype in _VIA_FLOAT32:
        return tf.cast(tf.cast(dy, tf.float32) * scale, dy.dtype)
    return dy * tf.cast(scale, dy.dtype)


def grad_reverse(x, lambda_=1.0) -> tf.Tensor:
    """Identity forward; the gradient is `-lambda_ * dy` (none for lambda_)."""
    lambda_ = tf.cast(lambda_, tf.float32)

    @tf.custom_gradient
    def _identity_reversed(x):
        def grad(dy):
            return reverse_gradient(dy, lambda_)

        return tf.identity(x), grad

    return _identity_reversed(x)
