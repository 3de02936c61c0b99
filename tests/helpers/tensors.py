"""Tensors, bitwise comparisons and forward/backward runs shared by the
tests of every area (conftest.py holds the fixtures)."""

import ctypes

import numpy as np
import tensorflow as tf

import grad_reverse

DTYPES = [tf.float16, tf.bfloat16, tf.float32, tf.float64]
LAMBDAS = [0.0, 0.1, 1.0, 6.0, 30.0, -1.0]
# ranks 0..6, plus empty tensors
SHAPES = [[], [5], [2, 3], [2, 1, 3], [1, 2, 2, 3], [2, 1, 2, 1, 3], [1, 2, 1, 2, 1, 3], [0], [2, 0, 3]]
_UINT_OF_SIZE = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def bits(t) -> np.ndarray:
    """The raw bits of a tensor/array, so comparisons are bitwise (and -0.0 != 0.0)."""
    a = as_numpy(t)
    return a.view(_UINT_OF_SIZE[a.dtype.itemsize])


def as_numpy(t) -> np.ndarray:
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t)


def assert_bitwise_equal(actual, expected) -> None:
    """Bitwise equality; a plain list/number `expected` is taken in `actual`'s dtype."""
    actual = as_numpy(actual)
    if not hasattr(expected, "dtype"):
        expected = np.asarray(expected, dtype=actual.dtype)
    expected = as_numpy(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    np.testing.assert_array_equal(bits(actual), bits(expected))


def data_pointer(t: tf.Tensor) -> int:
    """Address of an eager tensor's buffer, read from its DLPack capsule."""
    capsule = tf.experimental.dlpack.to_dlpack(t)
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    managed = get_pointer(capsule, b"dltensor")
    # DLManagedTensor starts with DLTensor, which starts with `void* data`.
    return ctypes.c_void_p.from_address(managed).value


def forward_backward(fn, x, dy, lambda_):
    """(y, dx) of `fn(x, lambda_)`, with `dy` as the incoming gradient."""
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x, lambda_)
    return y, tape.gradient(y, x, output_gradients=dy)


def native_forward_backward(x, dy, lambda_):
    """forward_backward of the native op."""
    return forward_backward(grad_reverse.grad_reverse, x, dy, lambda_)


def random_tensor(shape, dtype, seed=0, scale=10.0) -> tf.Tensor:
    rng = np.random.default_rng(seed)
    return tf.cast(tf.constant(rng.standard_normal(shape) * scale, tf.float64), dtype)


def unknown_length_dataset(batches: int = 3, batch: int = 4) -> tf.data.Dataset:
    """`batches` batches of (ones, zeros), shape [batch, 1], from a generator:
    a dataset whose length Keras learns only when it runs out (as with a
    stream), so a schedule cannot be told the fit's steps in advance."""

    def generate():
        for _ in range(batches):
            yield np.ones((batch, 1), "float32"), np.zeros((batch, 1), "float32")

    spec = (tf.TensorSpec([batch, 1], tf.float32), tf.TensorSpec([batch, 1], tf.float32))
    return tf.data.Dataset.from_generator(generate, output_signature=spec)


def ramp(steps, total: int, **kwargs) -> list:
    """The DANN schedule's lambda at each of `steps` out of `total` (progress
    step / (total - 1)); `kwargs`: dann_lambda's gamma and lambda_max."""
    from grad_reverse.schedule import dann_lambda

    return [dann_lambda(step / (total - 1), **kwargs) for step in steps]
