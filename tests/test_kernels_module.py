"""The framework-free kernels through the pybind11 module: on numpy arrays
here, on CuPy arrays where a GPU exists (the same checks as scripts/gpu_check.py)."""

import os
import sys

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")  # ships with TensorFlow

if os.environ.get("GRAD_REVERSE_KERNELS_DIR"):
    # A kernels-only build (scripts/sanitize.sh): import the module by itself,
    # without the package, which would import TensorFlow.
    sys.path.insert(0, os.environ["GRAD_REVERSE_KERNELS_DIR"])
    import _kernels
else:
    from grad_reverse import _kernels

LAMBDAS = [0.0, 0.1, 1.0, 6.0, 30.0, -1.0, 1e-3]
FLOAT_TYPES = [np.float32, np.float64]
HALF_TYPES = [np.float16, ml_dtypes.bfloat16]


def expected(x: np.ndarray, lambda_: float) -> np.ndarray:
    """numpy's own answer: float/double multiply by -lambda (lambda as float32);
    half/bfloat16 go through float32 and round once (numpy rounds to nearest even)."""
    scale = -np.float32(lambda_)
    # The inputs hold inf and NaN on purpose (and overflow for large lambdas):
    # IEEE results are the answer, not a warning.
    with np.errstate(invalid="ignore", over="ignore"):
        if x.dtype in (np.float32, np.float64):
            return x * x.dtype.type(scale)
        return (x.astype(np.float32) * scale).astype(x.dtype)


def all_values(dtype) -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint16).view(dtype)


def assert_same(actual: np.ndarray, wanted: np.ndarray) -> None:
    """Bitwise, except that any NaN matches any NaN."""
    a, w = actual.astype(np.float64), wanted.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(a), np.isnan(w))
    keep = ~np.isnan(w)
    uint = {2: np.uint16, 4: np.uint32, 8: np.uint64}[actual.dtype.itemsize]
    np.testing.assert_array_equal(actual.view(uint)[keep], wanted.view(uint)[keep])


@pytest.mark.parametrize("dtype", HALF_TYPES, ids=["float16", "bfloat16"])
@pytest.mark.parametrize("lambda_", LAMBDAS)
def test_every_16_bit_value_rounds_like_numpy(dtype, lambda_):
    x = all_values(dtype)
    assert_same(_kernels.neg_scale_cpu(x, lambda_), expected(x, lambda_))


@pytest.mark.parametrize("dtype", FLOAT_TYPES)
@pytest.mark.parametrize("lambda_", LAMBDAS)
def test_float_and_double_are_one_multiply(dtype, lambda_):
    x = (np.random.default_rng(0).standard_normal(4097) * 1e3).astype(dtype)
    x[:4] = [np.inf, -np.inf, np.nan, -0.0]
    assert_same(_kernels.neg_scale_cpu(x, lambda_), expected(x, lambda_))


@pytest.mark.parametrize("dtype", FLOAT_TYPES + HALF_TYPES)
def test_in_place_and_empty_and_shapes(dtype):
    x = np.linspace(-4, 4, 24).astype(dtype).reshape(2, 3, 4)
    want = expected(x, 0.5)
    out = _kernels.neg_scale_cpu(x, 0.5, out=x)
    assert out is x or np.shares_memory(out, x)
    assert_same(x, want)
    empty = np.zeros((0, 3), dtype)
    assert _kernels.neg_scale_cpu(empty, 1.0).shape == (0, 3)


def test_bad_inputs_are_clear_errors():
    with pytest.raises(TypeError, match="float16, bfloat16, float32 or float64"):
        _kernels.neg_scale_cpu(np.zeros(3, np.int32), 1.0)
    with pytest.raises(ValueError, match="C-contiguous"):
        _kernels.neg_scale_cpu(np.zeros((3, 4), np.float32)[:, ::2], 1.0)
    with pytest.raises(ValueError, match="out must be"):
        _kernels.neg_scale_cpu(np.zeros(3, np.float32), 1.0, out=np.zeros(3, np.float64))
    with pytest.raises(TypeError, match="__cuda_array_interface__"):
        _kernels.neg_scale_cuda(np.zeros(3, np.float32), np.zeros(3, np.float32), 1.0)


def _cupy_with_gpu():
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed (GPU kernel checks need it)")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except cupy.cuda.runtime.CUDARuntimeError as error:
        pytest.skip(f"no usable CUDA device: {error}")
    if not _kernels.cuda_compiled_in():
        pytest.fail("a GPU is present but the kernel module was built without CUDA")
    return cupy


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("n", [0, 1, 3, 4097, (1 << 24) + 3])
def test_cuda_kernel_matches_the_cpu_kernel(name, n):
    cupy = _cupy_with_gpu()
    host_dtype = ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)
    x = (np.random.default_rng(n).standard_normal(n + 1) * 100).astype(host_dtype)
    storage = x.view(np.uint16) if name == "bfloat16" else x
    # The offsets are taken on the device: cupy.asarray of a misaligned host
    # slice would land in a fresh, aligned device allocation.
    device_x = cupy.asarray(storage)
    for offset in (0, 1):  # 1: misaligned start
        want = _kernels.neg_scale_cpu(np.ascontiguousarray(x[offset : offset + n]), 0.3)
        device_in = device_x[offset : offset + n]
        same_alignment = cupy.empty_like(device_x)[offset : offset + n]  # vector path (+ head)
        aligned = cupy.empty(n, device_x.dtype)  # differs from device_in at offset 1: scalar path
        for device_out in (same_alignment, aligned):
            _kernels.neg_scale_cuda(device_in, device_out, 0.3, dtype=name)
            assert_same(cupy.asnumpy(device_out).view(host_dtype), want)
        assert_same(cupy.asnumpy(device_in).view(host_dtype), x[offset : offset + n])  # input untouched
        work = cupy.asarray(storage)[offset : offset + n]
        _kernels.neg_scale_cuda(work, work, 0.3, dtype=name)  # in place
        assert_same(cupy.asnumpy(work).view(host_dtype), want)
