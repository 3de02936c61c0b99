"""grad_reverse.options: the runtime choices switched in process.

The environment variables' defaults are tested in fresh processes elsewhere
(test_backward_modes_and_stock.py, test_stable_library.py, test_kernels_module.py); here each
setter changes what the running process does, and is undone after.
"""

import numpy as np
import pytest
import tensorflow as tf

import grad_reverse
from grad_reverse import ops, options
from grad_reverse._native import xla_fallback


@pytest.fixture
def restore_options():
    yield
    options.set_backward(None)
    options.set_cpu_path("auto")
    options.set_xla_fallback("auto")


def gradient_op_types() -> set[str]:
    x = tf.TensorSpec([4], tf.float32)

    @tf.function
    def gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = grad_reverse.grad_reverse(x, 0.5)
        return tape.gradient(y, x)

    return {op.type for op in gradient.get_concrete_function(x).graph.get_operations()}


def test_set_backward_switches_the_gradient_built_after_it(restore_options):
    options.set_backward("stock")
    assert ops.BACKWARD.kernel == "stock" and "stock" in ops.BACKWARD.reason
    assert "GradReverseGrad" not in gradient_op_types()
    options.set_backward("native")
    assert ops.BACKWARD.kernel == "native"
    assert "GradReverseGrad" in gradient_op_types()


def test_set_backward_none_returns_to_the_environment_default(restore_options, monkeypatch):
    monkeypatch.setenv(options.BACKWARD_VARIABLE, "stock")
    options.set_backward("native")
    assert options.backward_mode() == "native"
    options.set_backward(None)
    assert options.backward_mode() == "stock" and ops.BACKWARD.kernel == "stock"


def test_set_backward_refuses_an_unknown_mode_and_keeps_the_choice(restore_options):
    before = ops.BACKWARD
    with pytest.raises(ValueError, match="accepted values: auto .*native, stock"):
        options.set_backward("fast")
    assert before == ops.BACKWARD and options.backward_mode() != "fast"


def test_the_gradient_is_the_same_whichever_backward(restore_options):
    x = tf.constant(np.linspace(-3, 3, 17), tf.float32)
    results = []
    for mode in ("native", "stock"):
        options.set_backward(mode)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = grad_reverse.grad_reverse(x, 0.75)
        results.append(tape.gradient(y, x, output_gradients=x).numpy())
    np.testing.assert_array_equal(results[0], results[1])


def test_set_cpu_path_forces_the_op_librarys_path(restore_options):
    x = tf.constant(np.linspace(-3, 3, 1000), tf.float16)
    fastest = options.cpu_path()
    expected = ops.LIBRARY.module.grad_reverse_grad(x, tf.constant(0.3)).numpy()
    options.set_cpu_path("portable")
    assert options.cpu_path() == "portable"
    np.testing.assert_array_equal(ops.LIBRARY.module.grad_reverse_grad(x, tf.constant(0.3)).numpy(), expected)
    options.set_cpu_path("auto")
    assert options.cpu_path() == fastest


def test_set_cpu_path_refuses_an_unknown_path_and_changes_nothing(restore_options):
    before = options.cpu_path()
    with pytest.raises(ValueError, match="'sse9'"):
        options.set_cpu_path("sse9")
    assert options.cpu_path() == before


def xla_op_types() -> set[str]:
    @tf.function(jit_compile=True)
    def forward(x):
        return grad_reverse.grad_reverse(x, 0.5)

    return {op.type for op in forward.get_concrete_function(tf.TensorSpec([4], tf.float32)).graph.get_operations()}


def test_set_xla_fallback_always_traces_the_pure_python_version(restore_options):
    options.set_xla_fallback("always")
    assert "GradReverse" not in xla_op_types()
    options.set_xla_fallback("auto")
    assert ("GradReverse" in xla_op_types()) == (not xla_fallback.missing_xla_devices(ops.BUILD_INFO))


def test_set_xla_fallback_refuses_an_unknown_mode(restore_options):
    with pytest.raises(ValueError, match="auto, always"):
        options.set_xla_fallback("never")
    assert options.xla_fallback() == "auto"


def test_the_library_choice_is_read_from_the_environment_and_has_no_setter():
    assert options.library_mode({options.LIBRARY_VARIABLE: "stable"}) == "stable"
    assert options.library_mode({}) is None
    assert not hasattr(options, "set_library")
