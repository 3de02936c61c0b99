"""`grad_reverse()`, the Python face of the native GradReverse op, and the
gradients of both ops, registered by op type when the package is imported."""

from __future__ import annotations

import math
import numbers

import numpy as np
import tensorflow as tf

from grad_reverse import reference
from grad_reverse._keras import keras
from grad_reverse._native import backward_choice, calls, xla_fallback
from grad_reverse._native.loader import loaded
from grad_reverse._native.settings import NATIVE

# The process's op library, loaded here once (`loader.loaded()`).
LIBRARY = loaded()
_library = LIBRARY.module
BUILD_INFO = LIBRARY.build_info
"""The facts CMake recorded beside the loaded library: TensorFlow version, CUDA, XLA."""


def _cuda_driver_version() -> int:
    return calls.cuda_driver_version(LIBRARY.cdll)


def use_backward() -> backward_choice.Backward:
    """Decides the backward again (`settings.backward_mode()`, see
    `backward_choice`) and sets `BACKWARD`; the gradients below call the
    chosen function with no further test. Run at import, and by
    `options.set_backward`."""
    global BACKWARD, _reverse_dense
    BACKWARD = backward_choice.choose_backward(BUILD_INFO, _cuda_driver_version)
    _reverse_dense = _library.grad_reverse_grad if BACKWARD.kernel == NATIVE else backward_choice.stock_reverse
    return BACKWARD


BACKWARD: backward_choice.Backward = use_backward()

SUPPORTED_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64)
"""The dtypes `grad_reverse` takes; another raises a TypeError that lists them."""
_SUPPORTED_NAMES = ", ".join(d.name for d in SUPPORTED_DTYPES)
_SUPPORTED_SET = frozenset(SUPPORTED_DTYPES)  # a hashed lookup, cheaper than a tuple scan per call

LambdaLike = float | int | tf.Tensor | tf.Variable
# What an error about lambda_ says is accepted.
LAMBDA_ACCEPTED = "a real number, a float scalar tensor or a scalar tf.Variable / keras.Variable"

# Keras 3's variable wraps a tf.Variable (Keras 2 layers hold tf.Variables).
_KERAS_VARIABLE = getattr(keras, "Variable", None)


class InvalidLambdaError(tf.errors.InvalidArgumentError, ValueError):
    """A `lambda_` whose shape or value is wrong (not a scalar, not finite),
    found before the op runs.

    One type for one mistake: `grad_reverse()` and the `GradReverse` layer
    raise it alike. It is a `tf.errors.InvalidArgumentError` (what the op's
    kernel raises for a lambda known only at run time) and a `ValueError`
    (what a Keras layer raises for a bad argument, and what the layer on JAX
    and PyTorch raises), so code that catches either catches it. Made as
    TensorFlow's errors are, `InvalidLambdaError(None, None, message)`: inside
    a `tf.function`, AutoGraph re-raises an error of that signature as its own
    type (any other becomes a StagingError).
    """


def _invalid_argument(message: str) -> InvalidLambdaError:
    return InvalidLambdaError(None, None, message)


_EAGER_CONSTANTS: dict[float, tf.Tensor] = {}
_EAGER_CONSTANTS_MAX = 256


def _constant(value: float) -> tf.Tensor:
    """A float32 scalar for `value`; in eager mode cached, since a schedule
    reuses few values and building a constant is a large share of a small
    eager call. Graph constants belong to their graph, so those are not cached."""
    if not tf.executing_eagerly():
        return tf.constant(value, tf.float32)
    tensor = _EAGER_CONSTANTS.get(value)
    if tensor is None:
        if len(_EAGER_CONSTANTS) >= _EAGER_CONSTANTS_MAX:
            _EAGER_CONSTANTS.clear()
        with tf.device("/CPU:0"):  # the op reads lambda from host memory anyway
            tensor = _EAGER_CONSTANTS[value] = tf.constant(value, tf.float32)
    return tensor


def lambda_input(lambda_: LambdaLike) -> tf.Tensor | tf.Variable:
    """`lambda_` as the op's `lambda` input: a float32 scalar tensor, or a
    float32 scalar `tf.Variable` itself.

    A float32 scalar variable is passed to the op as it is: the generated op
    wrapper reads it in C at every call (a ReadVariableOp, recorded on the
    tape like any read), so a variable assigned between steps takes effect.
    Reading it here through `tf.convert_to_tensor` instead would add a read
    of its own to every eager call (docs/benchmark.md has its cost). A `keras.Variable` stands for its `.value` (the
    tf.Variable it holds, or that value autocast), which is what converting it
    reads. Everything else goes through `lambda_tensor`.
    """
    if isinstance(lambda_, (float, int)):  # a Python number, the other common case
        return lambda_tensor(lambda_)
    if isinstance(lambda_, (tf.Tensor, tf.Variable)):
        if lambda_.dtype == tf.float32 and lambda_.shape.rank == 0:
            return lambda_
    elif _KERAS_VARIABLE is not None and isinstance(lambda_, _KERAS_VARIABLE):
        return lambda_input(lambda_.value)
    return lambda_tensor(lambda_)


def lambda_tensor(lambda_: LambdaLike) -> tf.Tensor:
    """`lambda_` as the float32 scalar tensor the op takes, validated where it is known.

    A Python number is checked here (finite); a tensor or variable is checked
    for shape here when static, and by the kernel at run time otherwise, so a
    `tf.Variable` assigned between steps is read at every step.
    """
    if isinstance(lambda_, tf.Tensor) and lambda_.dtype == tf.float32 and lambda_.shape.rank == 0:
        return lambda_
    if isinstance(lambda_, (bool, np.bool_)):
        raise TypeError("lambda_ must be a real number or a float scalar tensor, got a bool")
    if isinstance(lambda_, numbers.Real):
        value = float(lambda_)
        if not math.isfinite(value):
            raise _invalid_argument(f"lambda_ must be finite, got {value}")
        return _constant(value)
    if lambda_ is None:
        raise TypeError(f"lambda_ must be {LAMBDA_ACCEPTED}, got None")
    try:
        tensor = tf.convert_to_tensor(lambda_)
    except (TypeError, ValueError) as error:  # a str, a ragged list, an arbitrary object
        raise TypeError(
            f"lambda_ must be {LAMBDA_ACCEPTED}, got {type(lambda_).__name__} {lambda_!r} ({error})"
        ) from None
    if not (tensor.dtype.is_floating or tensor.dtype.is_integer) or tensor.dtype.is_bool:
        raise TypeError(f"lambda_ must be a real number or a float scalar tensor, got dtype {tensor.dtype.name}")
    if tensor.shape.rank is not None and tensor.shape.rank != 0:
        raise _invalid_argument(f"lambda_ must be a scalar (shape []), got shape {tensor.shape.as_list()}")
    return tf.cast(tensor, tf.float32)


def check_dtype(x: tf.Tensor) -> None:
    if x.dtype not in _SUPPORTED_SET:
        raise TypeError(f"grad_reverse supports {_SUPPORTED_NAMES}; got a tensor of dtype {x.dtype.name}")


def grad_reverse(x, lambda_: LambdaLike = 1.0, name: str | None = None) -> tf.Tensor:
    """Gradient reversal: returns `x` unchanged; its gradient is `-lambda_ * dy`.

    Args:
      x: a float16, bfloat16, float32 or float64 tensor (or something
        convertible to one).
      lambda_: finite scalar: a Python number, a scalar tensor, or a
        `tf.Variable` (assign it between steps to schedule lambda without
        retracing a `tf.function`). It receives no gradient.
      name: optional op name.

    The forward output shares `x`'s buffer. The backward runs the native
    GradReverseGrad kernel, in place when TensorFlow allows it, or stock
    TensorFlow ops with the same results where that kernel cannot run on the
    GPU (`BACKWARD` says which, and why; `grad_reverse.options` chooses).
    """
    if not isinstance(x, tf.Tensor):
        x = tf.convert_to_tensor(x)
    check_dtype(x)
    lambda_ = lambda_input(lambda_)
    if xla_fallback.use_fallback(BUILD_INFO):
        # lambda_ gets no gradient at any order, as with the op (the
        # reference's backward `-lambda * dy` would give it one at the second).
        return reference.grad_reverse(x, tf.stop_gradient(lambda_))
    return _library.grad_reverse(x, lambda_, name=name)


def _reversed(dy, lambda_: tf.Tensor):
    """-lambda * dy (the chosen backward) on a dense gradient or on the values of IndexedSlices."""
    if isinstance(dy, tf.IndexedSlices):
        return tf.IndexedSlices(_reverse_dense(dy.values, lambda_), dy.indices, dy.dense_shape)
    return _reverse_dense(dy, lambda_)


@tf.RegisterGradient("GradReverse")
def _grad_reverse_gradient(op, dy):
    return [_reversed(dy, op.inputs[1]), None]


@tf.RegisterGradient("GradReverseGrad")
def _grad_reverse_grad_gradient(op, ddx):
    # GradReverseGrad is linear in dy, so its gradient is itself (in either backward).
    return [_reversed(ddx, op.inputs[1]), None]
