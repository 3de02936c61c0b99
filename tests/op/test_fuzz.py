"""Hypothesis fuzzing of `grad_reverse.grad_reverse` against the pure-Python
reference: random dtypes, shapes (empty ones and ranks 0 to 5), values
(including signed zeros, subnormals and the largest finite values), finite
lambdas (zero, negative, huge) given as a Python float, a float32 or float64
tensor, or a tf.Variable, in eager mode and in tf.function.

The forward must be bitwise the input; the backward bitwise the reference's.
"""

from __future__ import annotations

import functools

import ml_dtypes  # TensorFlow's own dependency; numpy's finfo does not know bfloat16
import numpy as np
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import grad_reverse
from grad_reverse import reference
from helpers.tensors import DTYPES, assert_bitwise_equal, forward_backward

SPECIALS = ("zero", "negative zero", "max", "lowest", "smallest normal", "smallest subnormal")
# A Python float is a constant in a tf.function, one trace per value: it is
# fuzzed in eager mode only.
LAMBDA_KINDS = {
    "eager": ("float", "float32 tensor", "float64 tensor", "variable"),
    "tf.function": ("float32 tensor", "float64 tensor", "variable"),
}


def special_value(name: str, dtype: tf.DType) -> float:
    info = ml_dtypes.finfo(dtype.as_numpy_dtype)
    return {
        "zero": 0.0,
        "negative zero": -0.0,
        "max": float(info.max),
        "lowest": float(info.min),
        "smallest normal": float(info.tiny),
        "smallest subnormal": float(info.smallest_subnormal),
    }[name]


shapes = st.lists(st.integers(0, 4), min_size=0, max_size=5)  # ranks 0-5, empty when a dimension is 0


@st.composite
def tensors(draw, dtype: tf.DType, shape: list[int]) -> tf.Tensor:
    """A tensor of `dtype`: normal values at a drawn scale (clipped to the
    dtype's finite range), with a few special values in front."""
    seed = draw(st.integers(0, 2**32 - 1))
    scale = draw(st.sampled_from([1e-6, 1.0, 1e3, 1e5, 1e40]))
    specials = draw(st.lists(st.sampled_from(SPECIALS), max_size=3))
    finite_max = float(ml_dtypes.finfo(dtype.as_numpy_dtype).max)
    values = np.clip(np.random.default_rng(seed).standard_normal(shape) * scale, -finite_max, finite_max)
    flat = values.reshape(-1)
    for i, name in enumerate(specials[: flat.size]):
        flat[i] = special_value(name, dtype)
    # float64 -> dtype in numpy (ml_dtypes for bfloat16): values within range stay finite.
    return tf.constant(values.astype(dtype.as_numpy_dtype))


# Every finite float32 (lambda is a float32 scalar), plus the edge cases named.
lambdas = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.1, 6.0, 1e-45, 3.4028234663852886e38, -3.4028234663852886e38]),
    st.floats(-10.0, 10.0, width=32),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
)


@functools.cache
def lambda_variable() -> tf.Variable:
    return tf.Variable(0.0, trainable=False)


@functools.cache
def traced(dtype: tf.DType, lambda_kind: str) -> tf.types.experimental.GenericFunction:
    """One tf.function per (dtype, lambda kind), traced once: any shape (the
    signature's shape is None), lambda an argument or a captured variable."""
    data = [tf.TensorSpec(None, dtype), tf.TensorSpec(None, dtype)]
    if lambda_kind == "variable":
        variable = lambda_variable()
        return tf.function(
            lambda x, dy: forward_backward(grad_reverse.grad_reverse, x, dy, variable), input_signature=data
        )
    lambda_dtype = tf.float64 if lambda_kind == "float64 tensor" else tf.float32
    return tf.function(
        lambda x, dy, lambda_: forward_backward(grad_reverse.grad_reverse, x, dy, lambda_),
        input_signature=data + [tf.TensorSpec([], lambda_dtype)],
    )


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    dtype=st.sampled_from(DTYPES),
    shape=shapes,
    lambda_value=lambdas,
    mode=st.sampled_from(list(LAMBDA_KINDS)),
)
def test_forward_is_the_input_and_backward_is_the_reference_bitwise(data, dtype, shape, lambda_value, mode):
    lambda_kind = data.draw(st.sampled_from(LAMBDA_KINDS[mode]), label="lambda kind")
    x = data.draw(tensors(dtype, shape), label="x")
    dy = data.draw(tensors(dtype, shape), label="dy")

    if mode == "eager":
        lambda_ = {
            "float": lambda_value,
            "float32 tensor": tf.constant(lambda_value, tf.float32),
            "float64 tensor": tf.constant(lambda_value, tf.float64),
            "variable": tf.Variable(lambda_value, trainable=False),
        }[lambda_kind]
        y, dx = forward_backward(grad_reverse.grad_reverse, x, dy, lambda_)
    else:
        fn = traced(dtype, lambda_kind)
        if lambda_kind == "variable":
            lambda_variable().assign(lambda_value)
            y, dx = fn(x, dy)
        else:
            y, dx = fn(x, dy, tf.constant(lambda_value, tf.float64 if lambda_kind == "float64 tensor" else tf.float32))
        assert fn.experimental_get_tracing_count() == 1  # the signature takes every shape

    _, dx_reference = forward_backward(reference.grad_reverse, x, dy, lambda_value)
    assert y.dtype == dtype and y.shape == x.shape
    assert_bitwise_equal(y, x)
    assert dx.dtype == dtype and dx.shape == x.shape
    assert_bitwise_equal(dx, dx_reference)
