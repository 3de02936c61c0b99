"""The framework-free kernels through the pybind11 module: on numpy arrays
here, on CuPy arrays where a GPU exists (the same checks as scripts/gpu_check_lib/).

The CPU checks run on every CPU path (cc/compute/cpu_paths.h) this machine
supports, forced with `_kernels.set_cpu_path`; the portable path runs everywhere."""

import os

import numpy as np
import pytest

from helpers.kernels import HALF_TYPES, _kernels, run_with_cpu_path_variable

ml_dtypes = pytest.importorskip("ml_dtypes")  # ships with TensorFlow

LAMBDAS = [0.0, 0.1, 1.0, 6.0, 30.0, -1.0, 1e-3]
FLOAT_TYPES = [np.float32, np.float64]


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


ALL_CPU_PATHS = ["portable", "avx2", "avx512", "avx512bf16"]
# Besides LAMBDAS: products in the float subnormal range (where AVX-512 BF16's
# conversion would flush to zero) and overflowing ones.
EDGE_LAMBDAS = [2.0**-100, 3e38]


@pytest.fixture(params=ALL_CPU_PATHS)
def cpu_path(request):
    """Forces each CPU path in turn (skipping those this CPU lacks), then
    restores the default choice."""
    if request.param not in _kernels.cpu_paths():
        pytest.skip(f"this CPU does not support the {request.param} path")
    _kernels.set_cpu_path(request.param)
    yield request.param
    _kernels.set_cpu_path("auto")


def portable_result(x: np.ndarray, lambda_: float) -> np.ndarray:
    _kernels.set_cpu_path("portable")
    try:
        return _kernels.neg_scale_cpu(x, lambda_)
    finally:
        _kernels.set_cpu_path("auto")


def assert_same_bits(actual: np.ndarray, wanted: np.ndarray) -> None:
    """Bitwise, NaN payloads included."""
    uint = {2: np.uint16, 4: np.uint32, 8: np.uint64}[actual.dtype.itemsize]
    np.testing.assert_array_equal(actual.view(uint), wanted.view(uint))


@pytest.mark.parametrize("dtype", HALF_TYPES, ids=["float16", "bfloat16"])
@pytest.mark.parametrize("lambda_", LAMBDAS + EDGE_LAMBDAS)
def test_every_16_bit_value_rounds_like_numpy_on_every_cpu_path(cpu_path, dtype, lambda_):
    x = all_values(dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # inf * 0 and overflow are meant
        want = expected(x, lambda_)
    got = _kernels.neg_scale_cpu(x, lambda_)
    assert _kernels.cpu_path() == cpu_path
    assert_same(got, want)
    # Every path gives the portable path's bits, NaNs included.
    assert_same_bits(got, portable_result(x, lambda_))


@pytest.mark.parametrize("dtype", FLOAT_TYPES)
@pytest.mark.parametrize("lambda_", LAMBDAS + EDGE_LAMBDAS)
def test_float_and_double_are_one_multiply_on_every_cpu_path(cpu_path, dtype, lambda_):
    x = (np.random.default_rng(0).standard_normal(4097) * 1e3).astype(dtype)
    x[:4] = [np.inf, -np.inf, np.nan, -0.0]
    with np.errstate(over="ignore", invalid="ignore"):
        want = expected(x, lambda_)
    assert_same(_kernels.neg_scale_cpu(x, lambda_), want)


@pytest.mark.parametrize("dtype", FLOAT_TYPES + HALF_TYPES)
def test_every_length_and_misalignment_on_every_cpu_path(cpu_path, dtype):
    """Vector bodies, remainders and masks: lengths 0 to 99 at element offsets
    0 to 3 (unaligned starts), out of place and in place; nothing past the end
    is written."""
    rng = np.random.default_rng(1)
    base = (rng.standard_normal(110) * 100).astype(dtype)
    base[5], base[17] = np.nan, -np.inf
    for offset in range(4):
        for n in range(100):
            x = base[offset : offset + n]
            want = portable_result(x, 0.3)
            _kernels.set_cpu_path(cpu_path)
            for streaming in (False, True):
                out_buffer = np.full(n + 8, 7, dtype)
                _kernels.neg_scale_cpu(x, 0.3, out=out_buffer[1 : n + 1], streaming=streaming)
                assert_same_bits(out_buffer[1 : n + 1], want)
                assert_same_bits(out_buffer[n + 1 :], np.full(7, 7, dtype))
                assert_same_bits(out_buffer[:1], np.full(1, 7, dtype))
            work = base.copy()[offset : offset + n]
            _kernels.neg_scale_cpu(work, 0.3, out=work)
            assert_same_bits(work, want)


@pytest.mark.parametrize("dtype", FLOAT_TYPES + HALF_TYPES)
def test_streaming_stores_give_the_same_bits_at_every_alignment(cpu_path, dtype):
    """Streaming stores work on whole aligned 4 KiB blocks between a head and
    a tail of regular stores: lengths around those boundaries, element and
    byte offsets (a byte offset leaves no aligned element: regular stores)."""
    rng = np.random.default_rng(2)
    size = np.dtype(dtype).itemsize
    x = (rng.standard_normal(3 * 4096) * 100).astype(dtype)
    raw = np.zeros((x.size + 64) * size + 1, np.uint8)
    for byte_offset in (0, size, 3 * size, 64 - size, 1):
        for n in (4096 // size - 1, 4096 // size, 4096 // size + 1, 2 * 4096 // size + 5, x.size):
            want = portable_result(x[:n], -2.0)
            _kernels.set_cpu_path(cpu_path)
            out = raw[byte_offset : byte_offset + n * size].view(dtype)
            _kernels.neg_scale_cpu(x[:n], -2.0, out=out, streaming=True)
            assert_same_bits(out, want)


def test_large_out_of_place_arrays_take_the_streaming_default(cpu_path):
    x = np.arange(1 << 23, dtype=np.float32) - 1000.5  # 32 MiB
    assert_same_bits(_kernels.neg_scale_cpu(x, 0.25), x * np.float32(-0.25))


def test_cpu_paths_start_portable_and_the_default_is_the_fastest():
    paths = _kernels.cpu_paths()
    assert paths[0] == "portable"
    assert set(paths) <= set(ALL_CPU_PATHS)
    assert paths == [p for p in ALL_CPU_PATHS if p in paths]  # slowest first
    if os.environ.get("GRAD_REVERSE_CPU_PATH", "auto") in ("", "auto"):
        assert _kernels.cpu_path() == paths[-1]


def test_set_cpu_path_rejects_unknown_and_unsupported_paths():
    with pytest.raises(ValueError, match="'sse9' is unknown.*accepted here: auto, portable"):
        _kernels.set_cpu_path("sse9")
    for path in set(ALL_CPU_PATHS) - set(_kernels.cpu_paths()):
        with pytest.raises(ValueError, match="not supported by this CPU"):
            _kernels.set_cpu_path(path)
    _kernels.set_cpu_path("portable")
    assert _kernels.cpu_path() == "portable"
    _kernels.set_cpu_path("auto")
    assert _kernels.cpu_path() == _kernels.cpu_paths()[-1] or "GRAD_REVERSE_CPU_PATH" in os.environ


def test_environment_variable_forces_the_path():
    done = run_with_cpu_path_variable("portable", "print(_kernels.cpu_path())")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "portable"


def test_invalid_environment_variable_is_a_clear_error_not_a_silent_fallback():
    done = run_with_cpu_path_variable("avx9000", "_kernels.neg_scale_cpu(np.ones(3, np.float32), 1.0)")
    assert done.returncode != 0
    assert "ValueError: GRAD_REVERSE_CPU_PATH='avx9000' is not a CPU path" in done.stderr
    assert "accepted here: auto, portable" in done.stderr


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
