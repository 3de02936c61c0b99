"""The native op against the pure-Python reference: values, gradients, modes."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import grad_reverse
from grad_reverse import _kernels, options, reference
from grad_reverse._keras import KERAS_3, keras
from helpers.kernels import op_library
from helpers.tensors import LAMBDAS, SHAPES, assert_bitwise_equal, data_pointer, forward_backward, random_tensor


def test_eager_forward_is_identity_and_backward_matches_reference_bitwise(dtype):
    for shape in SHAPES:
        x = random_tensor(shape, dtype, seed=1)
        dy = random_tensor(shape, dtype, seed=2)
        for lambda_ in LAMBDAS:
            y, dx = forward_backward(grad_reverse.grad_reverse, x, dy, lambda_)
            _, dx_ref = forward_backward(reference.grad_reverse, x, dy, lambda_)
            assert y.dtype == dtype and y.shape == x.shape
            assert_bitwise_equal(y, x)
            assert dx.dtype == dtype and dx.shape == x.shape
            assert_bitwise_equal(dx, dx_ref)


def test_backward_equals_minus_lambda_times_dy_computed_independently(dtype):
    x = random_tensor([64], dtype)
    dy = random_tensor([64], dtype, seed=3)
    for lambda_ in LAMBDAS:
        _, dx = forward_backward(grad_reverse.grad_reverse, x, dy, lambda_)
        compute = np.float64 if dtype == tf.float64 else np.float32
        expected = tf.cast(dy, tf.float64).numpy().astype(compute) * -compute(np.float32(lambda_))
        assert_bitwise_equal(dx, tf.cast(tf.constant(expected), dtype))


def test_lambda_zero_gives_exact_zeros(dtype):
    x = random_tensor([3, 4], dtype)
    dy = random_tensor([3, 4], dtype, seed=5)
    _, dx = forward_backward(grad_reverse.grad_reverse, x, dy, 0.0)
    assert np.all(tf.cast(dx, tf.float32).numpy() == 0.0)


def test_tf_function_matches_eager_for_every_shape(dtype):
    @tf.function(
        input_signature=[tf.TensorSpec(None, dtype), tf.TensorSpec(None, dtype), tf.TensorSpec([], tf.float32)]
    )
    def native(x, dy, lambda_):
        return forward_backward(grad_reverse.grad_reverse, x, dy, lambda_)

    for shape in SHAPES:
        x, dy = random_tensor(shape, dtype, 1), random_tensor(shape, dtype, 2)
        for lambda_ in LAMBDAS:
            y, dx = native(x, dy, tf.constant(lambda_))
            _, dx_ref = forward_backward(reference.grad_reverse, x, dy, lambda_)
            assert_bitwise_equal(y, x)
            assert_bitwise_equal(dx, dx_ref)
    assert len(native.get_concrete_function().graph.get_operations()) > 0


def test_compat_v1_graph_with_tf_gradients_in_a_session(dtype):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(dtype, [None, 3])
        dy = tf.compat.v1.placeholder(dtype, [None, 3])
        y = grad_reverse.grad_reverse(x, 0.1)
        (dx,) = tf.compat.v1.gradients(y, x, grad_ys=dy)
        y_ref = reference.grad_reverse(x, 0.1)
        (dx_ref,) = tf.compat.v1.gradients(y_ref, x, grad_ys=dy)
    x_val = tf.cast(random_tensor([4, 3], dtype), dtype).numpy()
    dy_val = tf.cast(random_tensor([4, 3], dtype, 9), dtype).numpy()
    with tf.compat.v1.Session(graph=graph) as session:
        outputs = session.run([y, dx, dx_ref], {x: x_val, dy: dy_val})
    assert_bitwise_equal(outputs[0], x_val)
    assert_bitwise_equal(outputs[1], outputs[2])


@pytest.mark.parametrize("lambda_", [0.5, 2.0])
def test_numeric_gradient_check(lambda_):
    x = tf.constant(np.random.default_rng(0).standard_normal((3, 4)))
    # GradReverse reports -lambda times the true (numeric) Jacobian, the identity.
    theoretical, numerical = tf.test.compute_gradient(lambda t: grad_reverse.grad_reverse(t, lambda_), [x])
    np.testing.assert_allclose(numerical[0], np.eye(12), atol=1e-6)
    np.testing.assert_allclose(theoretical[0], -lambda_ * numerical[0], atol=1e-6)
    # GradReverseGrad is linear: its registered gradient is its true Jacobian.
    theoretical, numerical = tf.test.compute_gradient(
        lambda t: grad_reverse.ops.LIBRARY.module.grad_reverse_grad(t, lambda_), [x]
    )
    np.testing.assert_allclose(theoretical[0], numerical[0], atol=1e-6)
    np.testing.assert_allclose(numerical[0], -lambda_ * np.eye(12), atol=1e-6)


def test_second_order_gradient_matches_reference(dtype):
    x = random_tensor([5], dtype)

    def second(fn):
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = fn(x, 3.0)
                loss = tf.reduce_sum(tf.cast(y, tf.float32) ** 3)
            g = inner.gradient(loss, x)
            gsum = tf.reduce_sum(tf.cast(g, tf.float32))
        return g, outer.gradient(gsum, x)

    g, h = second(grad_reverse.grad_reverse)
    g_ref, h_ref = second(reference.grad_reverse)
    assert_bitwise_equal(g, g_ref)
    assert_bitwise_equal(h, h_ref)
    # g = -lambda * 3y^2; its path back to x crosses the layer again:
    # dg/dx = (-lambda) * (-lambda * 6x) = 54x for lambda = 3.
    np.testing.assert_allclose(tf.cast(h, tf.float64).numpy(), 54.0 * tf.cast(x, tf.float64).numpy(), rtol=2e-2)


def test_gradient_of_grad_reverse_grad_is_itself():
    dy = tf.constant([1.0, -2.0])
    with tf.GradientTape() as tape:
        tape.watch(dy)
        dx = grad_reverse.ops.LIBRARY.module.grad_reverse_grad(dy, 2.0)
    assert_bitwise_equal(dx, [-2.0, 4.0])
    assert_bitwise_equal(tape.gradient(dx, dy, output_gradients=tf.constant([1.0, 1.0])), [-2.0, -2.0])


def test_lambda_gets_no_gradient():
    x = tf.constant([1.0, 2.0])
    lambda_ = tf.Variable(2.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(grad_reverse.grad_reverse(x, lambda_) ** 2)
    dx, dlambda = tape.gradient(loss, [x, lambda_])
    assert_bitwise_equal(dx, [-4.0, -8.0])
    assert dlambda is None


def test_variable_lambda_assigned_between_calls_takes_effect_without_retracing():
    lambda_ = tf.Variable(1.0)
    traces = []

    @tf.function
    def step(x):
        traces.append(1)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = grad_reverse.grad_reverse(x, lambda_)
        return tape.gradient(y, x)

    x = tf.ones([4])
    for value in [1.0, 0.25, 6.0, 0.0]:
        lambda_.assign(value)
        assert_bitwise_equal(step(x), np.full(4, -value, np.float32))
    assert len(traces) == 1
    assert step.experimental_get_tracing_count() == 1


VARIABLE_KINDS = {
    "tf.Variable": lambda: tf.Variable(1.0),
    "tf.Variable, not trainable": lambda: tf.Variable(1.0, trainable=False),
    "keras.Variable": lambda: keras.Variable(1.0),
}


@pytest.mark.parametrize("kind", VARIABLE_KINDS)
def test_variable_lambda_assigned_between_eager_calls_is_read_at_every_call(kind):
    # Eager calls pass a float32 variable to the op itself (no read in Python),
    # so this checks that the op reads the current value each time.
    if kind == "keras.Variable" and not KERAS_3:
        pytest.skip("keras.Variable is Keras 3 only")
    lambda_ = VARIABLE_KINDS[kind]()
    x, dy = tf.ones([4]), tf.ones([4])
    for value in [1.0, 0.25, 6.0, 0.0]:
        lambda_.assign(value)
        _, dx = forward_backward(grad_reverse.grad_reverse, x, dy, lambda_)
        assert_bitwise_equal(dx, np.full(4, -value, np.float32))


def test_lambda_accepts_numbers_tensors_and_variables():
    x = tf.constant([2.0])
    for lambda_ in [
        2,
        2.0,
        np.float64(2.0),
        np.int32(2),
        tf.constant(2.0),
        tf.constant(2.0, tf.float64),
        tf.constant(2),
        tf.Variable(2.0),
        tf.Variable(2.0, dtype=tf.float64),
    ]:
        _, dx = forward_backward(grad_reverse.grad_reverse, x, tf.constant([1.0]), lambda_)
        assert_bitwise_equal(dx, [-2.0]), lambda_


def indexed_slices_gradient(lambda_):
    """The gradient reaching a (6, 2) table through GradReverse and a gather of rows 1 and 4."""
    table = tf.Variable(tf.reshape(tf.range(12, dtype=tf.float32), [6, 2]))

    def gradient():
        with tf.GradientTape() as tape:
            rows = grad_reverse.grad_reverse(table, lambda_)
            loss = tf.reduce_sum(tf.gather(rows, [1, 4]) * [[1.0, 2.0]])
        return tape.gradient(loss, table)

    return gradient(), tf.function(gradient)()


def test_indexed_slices_gradient_stays_sparse_and_reversed():
    for grad in indexed_slices_gradient(0.5):  # eager, tf.function
        # A dense gradient here would be a (6, 2) tensor of mostly zeros.
        assert isinstance(grad, tf.IndexedSlices), type(grad)
        assert grad.indices.numpy().tolist() == [1, 4]
        assert_bitwise_equal(grad.values, [[-0.5, -1.0], [-0.5, -1.0]])
        assert tf.get_static_value(grad.dense_shape).tolist() == [6, 2]


def test_shape_inference_keeps_unknown_rank_and_known_shapes():
    @tf.function(input_signature=[tf.TensorSpec(None, tf.float32)])
    def unknown_rank(x):
        y = grad_reverse.grad_reverse(x)
        assert y.shape.rank is None
        return y

    @tf.function(input_signature=[tf.TensorSpec([None, 7], tf.float32)])
    def partial(x):
        y = grad_reverse.grad_reverse(x)
        assert y.shape.as_list() == [None, 7]
        return y

    unknown_rank.get_concrete_function()
    partial.get_concrete_function()


def test_forward_shares_the_input_buffer_and_a_copy_would_not():
    x = tf.random.normal([1024])
    assert data_pointer(grad_reverse.grad_reverse(x)) == data_pointer(x)
    assert data_pointer(x * 1.0) != data_pointer(x)  # the check can tell a copy


@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
def test_nan_and_inf_in_x_and_dy_propagate(dtype, special):
    values = tf.cast(tf.constant([1.0, special, -2.0]), dtype)
    y, dx = forward_backward(grad_reverse.grad_reverse, values, values, 2.0)
    assert_bitwise_equal(y, values)
    dx64 = tf.cast(dx, tf.float64).numpy()
    expected = -2.0 * tf.cast(values, tf.float64).numpy()
    np.testing.assert_array_equal(np.isnan(dx64), np.isnan(expected))
    np.testing.assert_array_equal(dx64[~np.isnan(expected)], expected[~np.isnan(expected)])


@pytest.mark.parametrize("bad", [tf.int32, tf.int64, tf.bool, tf.string, tf.complex64, tf.uint8])
def test_unsupported_x_dtype_is_a_type_error_listing_supported(bad):
    x = tf.zeros([2], bad) if bad != tf.string else tf.constant(["a", "b"])
    with pytest.raises(TypeError, match="float16, bfloat16, float32, float64.*" + bad.name):
        grad_reverse.grad_reverse(x)


@pytest.mark.parametrize("lambda_", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_python_lambda_is_invalid_argument(lambda_):
    with pytest.raises(tf.errors.InvalidArgumentError, match="finite"):
        grad_reverse.grad_reverse(tf.ones([2]), lambda_)


@pytest.mark.parametrize("lambda_", [float("nan"), float("inf")])
def test_non_finite_variable_lambda_is_invalid_argument_at_run_time(lambda_):
    variable = tf.Variable(1.0)

    @tf.function
    def step(x):
        return grad_reverse.grad_reverse(x, variable)

    step(tf.ones([2]))
    variable.assign(lambda_)
    with pytest.raises(tf.errors.InvalidArgumentError, match="lambda_ must be finite"):
        step(tf.ones([2]))
    # the backward kernel checks too
    with pytest.raises(tf.errors.InvalidArgumentError, match="lambda_ must be finite"):
        grad_reverse.ops.LIBRARY.module.grad_reverse_grad(tf.ones([2]), tf.constant(lambda_))


@pytest.mark.parametrize("shape", [[1], [2], [1, 1]])
def test_non_scalar_lambda_is_invalid_argument_naming_the_shape(shape):
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"scalar.*\[" + ", ".join(map(str, shape)) + r"\]"):
        grad_reverse.grad_reverse(tf.ones([2]), tf.ones(shape))


def test_non_scalar_lambda_of_unknown_static_shape_fails_in_the_kernel():
    @tf.function(input_signature=[tf.TensorSpec(None, tf.float32)])
    def step(lambda_):
        return grad_reverse.grad_reverse(tf.ones([2]), lambda_)

    with pytest.raises(tf.errors.InvalidArgumentError, match=r"lambda_ must be a scalar.*\[2\]"):
        step(tf.ones([2]))


@pytest.mark.parametrize("lambda_", [True, "1.0", tf.constant("x"), tf.constant(True), tf.constant(1 + 2j)])
def test_lambda_of_wrong_type_is_a_type_error(lambda_):
    with pytest.raises(TypeError, match="lambda_"):
        grad_reverse.grad_reverse(tf.ones([2]), lambda_)


# ------------------------------------------------- CPU paths of the kernel ----

ALL_CPU_PATHS = ["portable", "avx2", "avx512", "avx512bf16"]


@pytest.fixture(params=ALL_CPU_PATHS)
def op_cpu_path(request):
    """Forces each CPU path of the op library in turn (skipping those this CPU
    lacks), then restores the default choice."""
    library = op_library()
    supported = library.GradReverseSetCpuPath(request.param.encode()) == 0
    # The op library and the pybind11 module choose with the same code.
    assert supported == (request.param in _kernels.cpu_paths())
    if not supported:
        pytest.skip(f"this CPU does not support the {request.param} path")
    assert library.GradReverseCpuPath().decode() == request.param
    yield request.param
    assert library.GradReverseSetCpuPath(b"auto") == 0


def assert_matches_with_any_nan(actual, expected) -> None:
    """Bitwise where `expected` is a number; NaN where it is NaN (TensorFlow's
    casts and the kernels may pick different NaN payloads)."""
    actual64, expected64 = (tf.cast(t, tf.float64).numpy() for t in (actual, expected))
    nan = np.isnan(expected64)
    np.testing.assert_array_equal(np.isnan(actual64), nan)
    assert_bitwise_equal(tf.boolean_mask(actual, ~nan), tf.boolean_mask(expected, ~nan))


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16], ids=["float16", "bfloat16"])
def test_every_16_bit_value_matches_the_reference_on_every_cpu_path(op_cpu_path, dtype):
    """Under TensorFlow's own floating-point settings (its threads flush
    subnormals), eager and in a graph, every path rounds like the reference."""
    dy = tf.bitcast(tf.constant(np.arange(1 << 16, dtype=np.uint16)), dtype)
    graph_backward = tf.function(grad_reverse.ops.LIBRARY.module.grad_reverse_grad)
    for lambda_ in LAMBDAS + [2.0**-100, 3e38]:
        want = reference.reverse_gradient(dy, tf.constant(lambda_))
        assert_matches_with_any_nan(grad_reverse.ops.LIBRARY.module.grad_reverse_grad(dy, lambda_), want)
        assert_matches_with_any_nan(graph_backward(dy, tf.constant(lambda_)), want)


# (1 << 22) + 7: 16 MiB and more for float32 and float64, out of place, so the
# kernel writes with streaming stores where they are on (both choices forced),
# split over the intra-op threads; 1 << 18 | 7 stays on the calling thread.
@pytest.mark.parametrize("n", [1, 31, 1000, 1 << 18 | 7, (1 << 22) + 7])
def test_every_dtype_and_odd_length_matches_the_reference_on_every_cpu_path(op_cpu_path, dtype, n):
    dy = random_tensor([n], dtype, seed=n)
    want = reference.reverse_gradient(dy, tf.constant(0.3))
    try:
        for stores in ("on", "off"):
            options.set_streaming_stores(stores)
            assert_bitwise_equal(grad_reverse.ops.LIBRARY.module.grad_reverse_grad(dy, 0.3), want)
    finally:
        options.set_streaming_stores("auto")


def test_invalid_cpu_path_variable_fails_the_kernel_with_a_clear_error():
    code = (
        "import grad_reverse, tensorflow as tf\ngrad_reverse.ops.LIBRARY.module.grad_reverse_grad(tf.ones([2]), 1.0)\n"
    )
    env = dict(os.environ, GRAD_REVERSE_CPU_PATH="avx9000", TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "FailedPreconditionError" in done.stderr
    assert "GRAD_REVERSE_CPU_PATH='avx9000' is not a CPU path; accepted here: auto, portable" in done.stderr
