"""The op on a GPU: placement, forward buffer sharing (in every build), the
CUDA backward kernel (in a CUDA build) and the stock-ops backward bitwise equal
to the CPU kernel, the backward the package chose, the in-place path, a
tf.Variable lambda (host memory), large odd lengths, a misaligned buffer,
tf.function.

Runs when TensorFlow sees a GPU; skipped otherwise (tensorflow-cpu, or no CUDA
device). The kernel itself is also checked without TensorFlow by
tests/op/test_kernels_module.py and scripts/gpu_check_lib/.

Test values are kept away from denormals: TensorFlow's CPU executor flushes
denormals to zero and the GPU kernel does not, so a denormal would compare the
two devices' floating-point modes rather than the kernels.
"""

import numpy as np
import pytest
import tensorflow as tf

import grad_reverse
from grad_reverse import ops
from grad_reverse._native import backward_choice, calls, gpu_facts
from helpers.tensors import LAMBDAS, assert_bitwise_equal, data_pointer, random_tensor
from helpers.tensors import native_forward_backward as forward_backward

GPUS = tf.config.list_physical_devices("GPU")
pytestmark = pytest.mark.skipif(
    not GPUS, reason="TensorFlow sees no GPU (tensorflow-cpu, or no CUDA device): GPU tests skipped"
)

GPU, CPU = "/GPU:0", "/CPU:0"
# Tests of GradReverseGrad's own GPU kernel, which only a CUDA build has.
needs_cuda_kernel = pytest.mark.skipif(
    not grad_reverse.BUILD_INFO.get("cuda"), reason="the library was built without CUDA kernels"
)
SHAPES = [[], [1], [7], [3, 67], [2, 3, 4, 5], [0], [2, 0, 3]]


def normal_tensor(shape, dtype, seed) -> tf.Tensor:
    """Random values of magnitude 0.5 and up (on the CPU), so that -lambda * dy is
    normal or an exact zero in every dtype for every lambda in LAMBDAS."""
    with tf.device(CPU):
        t = random_tensor(shape, tf.float64, seed, scale=1.0)
        return tf.cast(tf.sign(t) * (0.5 + tf.abs(t)), dtype)


def on(device: str, t: tf.Tensor) -> tf.Tensor:
    with tf.device(device):
        return tf.identity(t)


def assert_on(device: str, t: tf.Tensor) -> None:
    # With soft placement (the eager default), an op without a kernel for the
    # requested device runs on the CPU silently; the output's device says
    # where it really ran ("/job:localhost/replica:0/task:0/device:GPU:0").
    assert t.device.endswith("device:" + device.lstrip("/")), f"expected a tensor on {device}, got {t.device!r}"


def grad_reverse_grad(dy, lambda_):
    return grad_reverse.ops.LIBRARY.module.grad_reverse_grad(dy, lambda_)


def test_auto_uses_the_cuda_kernel_where_it_can_run_and_stock_ops_otherwise():
    backward, build = grad_reverse.ops.BACKWARD, grad_reverse.BUILD_INFO
    if backward.mode != "auto":
        pytest.skip(f"GRAD_REVERSE_BACKWARD={backward.mode} chose")
    if not build.get("cuda"):
        assert backward.kernel == "stock" and "has no CUDA kernels" in backward.warning, backward
        return
    driver = calls.cuda_driver_version(ops.LIBRARY.cdll)
    assert driver > 0, "TensorFlow sees a GPU, so the driver must answer"
    architectures = build["cuda_architectures"].split(";")
    capabilities = [gpu_facts.compute_capability(gpu) for gpu in gpu_facts.visible_gpus()]
    assert None not in capabilities, "TensorFlow reports each GPU's compute capability"
    can_run = driver // 1000 >= gpu_facts.major_version(build["cuda_toolkit_version"]) and all(
        gpu_facts.runs_on(architectures, capability) for capability in capabilities
    )
    assert backward.kernel == ("native" if can_run else "stock"), (driver, backward)


def test_stock_backward_on_the_gpu_is_bitwise_equal_to_the_cpu_kernel(dtype):
    # Values are normal (see normal_tensor), so no NaN payload or flushing
    # question arises: this compares the rounding.
    dy_host = normal_tensor([4099], dtype, 9)
    dy_gpu, dy_cpu = on(GPU, dy_host), on(CPU, dy_host)
    for lambda_ in LAMBDAS:
        with tf.device(GPU):
            dx_gpu = backward_choice.stock_reverse(dy_gpu, tf.constant(lambda_))
        with tf.device(CPU):
            dx_cpu = grad_reverse_grad(dy_cpu, lambda_)
        assert_on(GPU, dx_gpu)
        assert_bitwise_equal(dx_gpu, dx_cpu)


def test_forward_runs_on_the_gpu_and_shares_the_input_buffer(dtype):
    x = on(GPU, normal_tensor([1031], dtype, 1))
    with tf.device(GPU):
        y = grad_reverse.grad_reverse(x, 0.5)
    assert_on(GPU, y)
    assert y.dtype == dtype
    assert data_pointer(y) == data_pointer(x)
    assert_bitwise_equal(y, x)


@needs_cuda_kernel
def test_backward_on_the_gpu_is_bitwise_equal_to_the_cpu_kernel(dtype):
    for index, shape in enumerate(SHAPES):
        dy_host = normal_tensor(shape, dtype, seed=10 + index)
        dy_gpu, dy_cpu = on(GPU, dy_host), on(CPU, dy_host)
        for lambda_ in LAMBDAS:
            with tf.device(GPU):
                dx_gpu = grad_reverse_grad(dy_gpu, lambda_)
            with tf.device(CPU):
                dx_cpu = grad_reverse_grad(dy_cpu, lambda_)
            assert_on(GPU, dx_gpu)
            assert_on(CPU, dx_cpu)
            assert dx_gpu.dtype == dtype and dx_gpu.shape == shape
            assert_bitwise_equal(dx_gpu, dx_cpu)


def test_gradient_tape_on_the_gpu_matches_the_cpu_eagerly_and_under_tf_function(dtype):
    x_host, dy_host = normal_tensor([5, 129], dtype, 1), normal_tensor([5, 129], dtype, 2)
    compiled = tf.function(forward_backward)
    for lambda_ in LAMBDAS:
        with tf.device(CPU):
            _, dx_cpu = forward_backward(on(CPU, x_host), on(CPU, dy_host), lambda_)
        x_gpu, dy_gpu = on(GPU, x_host), on(GPU, dy_host)
        for run in (forward_backward, compiled):
            with tf.device(GPU):
                y, dx = run(x_gpu, dy_gpu, tf.constant(lambda_))
            assert_on(GPU, y)
            assert_on(GPU, dx)
            assert_bitwise_equal(y, x_host)
            assert_bitwise_equal(dx, dx_cpu)


@needs_cuda_kernel
def test_backward_on_the_gpu_writes_into_a_forwardable_dy_and_the_check_can_tell():
    # The allocator's peak tells whether dx got its own buffer. float32 only:
    # the forwarding is the same template code for every dtype.
    n = 16 << 20
    nbytes = 4 * n  # 64 MiB tensors dominate the peak
    x = on(GPU, tf.ones([n], tf.float32))

    @tf.function
    def in_place(x):
        dy = x * 2.0  # a temporary only the backward op reads: forwardable
        dx = grad_reverse_grad(dy, 0.5)
        return tf.reduce_min(dx), tf.reduce_max(dx)

    @tf.function
    def not_in_place(x):
        dy = x * 2.0
        dx = grad_reverse_grad(dy, 0.5)
        return tf.reduce_min(dx), tf.reduce_max(dx), dy  # dy outlives the op: not forwardable

    def peak_growth(fn):
        with tf.device(GPU):
            fn(x)  # trace and warm up outside the measurement
            tf.config.experimental.reset_memory_stats("GPU:0")
            before = tf.config.experimental.get_memory_info("GPU:0")["current"]
            outputs = fn(x)
            low, high = (float(t.numpy()) for t in outputs[:2])
        assert low == high == -1.0  # -0.5 * (2 * 1)
        assert_on(GPU, outputs[0])
        return tf.config.experimental.get_memory_info("GPU:0")["peak"] - before

    grown_in_place = peak_growth(in_place)
    grown_copy = peak_growth(not_in_place)
    # In place only dy is allocated; otherwise dy and dx both are.
    assert grown_in_place < 1.5 * nbytes, (grown_in_place, nbytes)
    assert grown_copy > 1.5 * nbytes, (grown_copy, nbytes)


@needs_cuda_kernel
def test_in_place_path_on_the_gpu_matches_the_cpu_kernel(dtype):
    dy_host = normal_tensor([4099], dtype, 3)

    @tf.function
    def backward_of_a_temporary(dy, lambda_):
        # dy * 2 is exact and a temporary only the backward op reads, so the
        # op may write into it (the float32 test above shows that it does).
        return grad_reverse_grad(dy * tf.constant(2, dy.dtype), lambda_)

    for lambda_ in LAMBDAS:
        with tf.device(GPU):
            dx_gpu = backward_of_a_temporary(on(GPU, dy_host), tf.constant(lambda_))
        with tf.device(CPU):
            dx_cpu = backward_of_a_temporary(on(CPU, dy_host), tf.constant(lambda_))
        assert_on(GPU, dx_gpu)
        assert_bitwise_equal(dx_gpu, dx_cpu)


@pytest.mark.parametrize("variable_device", [GPU, CPU])
def test_variable_lambda_is_read_on_every_step_without_retracing(variable_device):
    # The kernel takes lambda in host memory: TensorFlow copies a GPU variable's
    # value to the host for it, and a CPU variable's value goes straight in.
    with tf.device(variable_device):
        lambda_ = tf.Variable(1.0, trainable=False)
    assert_on(variable_device, lambda_.read_value())
    x_host, dy_host = normal_tensor([1000], tf.float32, 4), normal_tensor([1000], tf.float32, 5)
    x, dy = on(GPU, x_host), on(GPU, dy_host)

    @tf.function
    def step(x, dy):
        with tf.device(GPU):
            return forward_backward(x, dy, lambda_)[1]

    for value in [0.25, 6.0, 0.0, -1.0, 30.0]:
        lambda_.assign(value)
        dx = step(x, dy)
        assert_on(GPU, dx)
        with tf.device(CPU):
            assert_bitwise_equal(dx, grad_reverse_grad(on(CPU, dy_host), value))
    assert step.experimental_get_tracing_count() == 1


@needs_cuda_kernel
def test_large_odd_length_on_the_gpu_matches_the_cpu_kernel(dtype):
    dy_host = normal_tensor([(1 << 22) + 3], dtype, 6)
    with tf.device(GPU):
        dx_gpu = grad_reverse_grad(on(GPU, dy_host), 0.3)
    with tf.device(CPU):
        dx_cpu = grad_reverse_grad(on(CPU, dy_host), 0.3)
    assert_on(GPU, dx_gpu)
    assert_bitwise_equal(dx_gpu, dx_cpu)


def misaligned_gpu_tensor(values: tf.Tensor):
    """(tensor, None) with `values` in a GPU buffer that starts one element past
    an aligned address, or (None, why not). TensorFlow gives its own slices
    fresh aligned buffers, so the buffer is made by CuPy or PyTorch and
    imported through DLPack, which TensorFlow does not copy."""
    reasons = []
    try:
        import cupy

        # CuPy has no bfloat16: its bits travel as uint16 and are bitcast
        # back, which shares the buffer.
        host = values.numpy()
        if values.dtype == tf.bfloat16:
            host = tf.bitcast(values, tf.uint16).numpy()
        device_array = cupy.asarray(np.concatenate([host[:1], host]))[1:]
        cupy.cuda.runtime.deviceSynchronize()  # TensorFlow reads it on its own stream
        with tf.device(GPU):
            tensor = tf.experimental.dlpack.from_dlpack(device_array.__dlpack__())
            return tf.bitcast(tensor, values.dtype) if tensor.dtype != values.dtype else tensor, None
    except Exception as error:  # no CuPy, no device it can use, or a DLPack it cannot export
        reasons.append(f"CuPy: {type(error).__name__}: {error}")
    try:
        import torch
        import torch.utils.dlpack

        torch_dtype = {
            tf.float16: torch.float16,
            tf.bfloat16: torch.bfloat16,
            tf.float32: torch.float32,
            tf.float64: torch.float64,
        }[values.dtype]
        # Through float64, which holds every value of the four dtypes exactly.
        host = torch.from_numpy(tf.cast(values, tf.float64).numpy()).to(torch_dtype)
        device_tensor = torch.cat([host[:1], host]).cuda()[1:]
        torch.cuda.synchronize()
        with tf.device(GPU):
            return tf.experimental.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(device_tensor)), None
    except Exception as error:
        reasons.append(f"PyTorch: {type(error).__name__}: {error}")
    return None, "; ".join(reasons)


@needs_cuda_kernel
def test_misaligned_dy_on_the_gpu_matches_the_cpu_kernel(dtype):
    dy_host = normal_tensor([4097], dtype, 7)
    dy, why_not = misaligned_gpu_tensor(dy_host)
    if dy is None:
        pytest.skip(f"no misaligned GPU buffer (TensorFlow's own slices are aligned): {why_not}")
    if data_pointer(dy) % 16 == 0:
        pytest.skip("TensorFlow copied the imported buffer to an aligned one")
    assert_on(GPU, dy)
    assert_bitwise_equal(dy, dy_host)
    for lambda_ in LAMBDAS:
        with tf.device(GPU):
            dx = grad_reverse_grad(dy, lambda_)
        with tf.device(CPU):
            dx_cpu = grad_reverse_grad(on(CPU, dy_host), lambda_)
        assert_on(GPU, dx)
        assert_bitwise_equal(dx, dx_cpu)
