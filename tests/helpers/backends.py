"""The JAX and PyTorch sides of tests/backends/: the backend Keras runs on,
the dtypes it has, forward and backward through a layer, and the plain
expression the backward must equal. Imports no TensorFlow.

`BACKEND` is Keras' backend in this process; the tests skip (saying why)
where it is neither jax nor torch: they run in environments made for them
(`.ci/run` makes one for each, without TensorFlow).
"""

from __future__ import annotations

import contextlib

import keras
import ml_dtypes
import numpy as np
import pytest

BACKEND = keras.backend.backend()
ON_JAX_OR_TORCH = BACKEND in ("jax", "torch")
SKIP_REASON = (
    f"the JAX/PyTorch layer's tests need Keras on jax or torch (KERAS_BACKEND), and it runs on {BACKEND} here; "
    ".ci/run runs them in environments made for each"
)
needs_jax_or_torch = pytest.mark.skipif(not ON_JAX_OR_TORCH, reason=SKIP_REASON)
# The recipe and the backend choice are Keras 3's (TensorFlow 2.15 runs Keras 2).
KERAS_3 = int(keras.__version__.split(".")[0]) >= 3
needs_keras_3 = pytest.mark.skipif(not KERAS_3, reason=f"Keras 3's backends; this is Keras {keras.__version__}")

# The dtypes of each backend's CPU: JAX's float64 needs x64 mode, which `precision()` turns on.
DTYPES = ("float16", "bfloat16", "float32", "float64")
NUMPY_DTYPES = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
}
UNSIGNED = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def precision(dtype: str):
    """The context a test of `dtype` runs in: JAX's x64 mode for float64."""
    if BACKEND == "jax" and dtype == "float64":
        import jax

        return jax.enable_x64(True)
    return contextlib.nullcontext()


def to_numpy(tensor) -> np.ndarray:
    """A tensor of the backend as numpy (bfloat16 from PyTorch as float32, exactly)."""
    if BACKEND == "torch":
        import torch

        tensor = tensor.detach().cpu()
        return (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).numpy()
    return np.asarray(tensor)


def tensor(array: np.ndarray, dtype: str):
    """`array` as a tensor of the backend, of `dtype`."""
    if BACKEND == "torch":
        import torch

        return torch.tensor(np.asarray(array, np.float64), dtype=getattr(torch, dtype))
    import jax.numpy as jnp

    return jnp.asarray(np.asarray(array).astype(NUMPY_DTYPES[dtype]))


def bits(array: np.ndarray, dtype: str) -> np.ndarray:
    """The raw bits of `array` read as `dtype`, for bitwise comparison."""
    values = np.asarray(array).astype(NUMPY_DTYPES[dtype])
    return values.view(UNSIGNED[values.dtype.itemsize])


def forward_backward(function, x, dy):
    """`(y, dx)`: `function(x)` and the gradient `dy` pulls back to `x`, as tensors of the backend."""
    if BACKEND == "torch":
        x = x.detach().requires_grad_(True)
        y = function(x)
        y.backward(dy)
        return y, x.grad
    import jax

    y, pullback = jax.vjp(function, x)
    return y, pullback(dy)[0]


def plain_reversed(dy: np.ndarray, lambda_: float, dtype: str) -> np.ndarray:
    """The op's contract in numpy: lambda rounded to float32; float16 and
    bfloat16 multiplied in float32 and rounded once, float32 and float64 in
    their own type."""
    scale = -np.float32(lambda_)
    dy = np.asarray(dy).astype(NUMPY_DTYPES[dtype])
    if dtype in ("float16", "bfloat16"):
        return (dy.astype(np.float32) * scale).astype(NUMPY_DTYPES[dtype])
    return dy * NUMPY_DTYPES[dtype].type(scale)


def gradients_of(function, variables: list, inputs: list) -> tuple:
    """`(value, gradients of the variables, gradients of the inputs)`: `function(*inputs)` (a scalar,
    reading `variables` as a Keras model does) differentiated on this process's backend, TensorFlow
    included; everything as float64 numpy."""
    as64 = lambda values: [np.asarray(to_numpy_any(v), np.float64) for v in values]  # noqa: E731
    if BACKEND == "tensorflow":
        import tensorflow as tf

        inputs = [tf.constant(x) for x in inputs]
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            value = function(*inputs)
        grads = tape.gradient(value, [*variables, *inputs])
    elif BACKEND == "torch":
        import torch

        inputs = [torch.tensor(x, requires_grad=True) for x in inputs]
        for variable in variables:
            variable.value.grad = None
        value = function(*inputs)
        value.backward()
        grads = [variable.value.grad for variable in variables] + [x.grad for x in inputs]
    else:
        import jax

        def pure(values, inputs):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return function(*inputs)

        value, (variable_grads, input_grads) = jax.value_and_grad(pure, argnums=(0, 1))(
            [v.value for v in variables], [jax.numpy.asarray(x) for x in inputs]
        )
        grads = list(variable_grads) + list(input_grads)
    grads = as64(grads)
    return float(to_numpy_any(value)), grads[: len(variables)], grads[len(variables) :]


def to_numpy_any(tensor) -> np.ndarray:
    """A tensor of any backend (TensorFlow's too) as numpy."""
    return keras.ops.convert_to_numpy(tensor) if KERAS_3 else np.asarray(tensor)


needs_tensorflow = pytest.mark.skipif(
    BACKEND != "tensorflow",
    reason=f"TensorFlow's own input (tf.data, tf.Variable, tf.function); Keras runs on {BACKEND} here, and the "
    "TensorFlow rows of .ci/run run it",
)
