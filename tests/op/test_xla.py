"""XLA: jit_compile forward/backward bitwise equal to the non-XLA op, second
order, Variable lambda, Keras fit(jit_compile=True), plain HLO, and loading the
library after TensorFlow has registered its XLA kernels."""

import subprocess
import sys
import textwrap
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import grad_reverse
from grad_reverse._native import xla_fallback
from helpers.models import batch, dann_model
from helpers.tensors import LAMBDAS, assert_bitwise_equal, forward_backward, random_tensor
from helpers.tensors import native_forward_backward as fwd_bwd

jit_fwd_bwd = tf.function(fwd_bwd, jit_compile=True)
# Tests of the library's own XLA kernels; a build without them (TensorFlow
# 2.19, whose tf2xla headers cannot be compiled against) says why in its
# build record, and the other tests here then exercise the pure-Python
# fallback inside XLA instead.
needs_xla_kernels = pytest.mark.skipif(
    not grad_reverse.BUILD_INFO["xla"],
    reason=f"this build has no XLA kernels: {grad_reverse.BUILD_INFO.get('xla_note')}",
)


def test_xla_forward_backward_is_bitwise_equal_to_the_native_kernels(dtype):
    x = random_tensor([3, 67], dtype, 1)
    dy = random_tensor([3, 67], dtype, 2)
    for lambda_ in LAMBDAS:
        y, dx = jit_fwd_bwd(x, dy, tf.constant(lambda_))
        y_ref, dx_ref = fwd_bwd(x, dy, lambda_)
        assert y.dtype == dtype and dx.dtype == dtype
        assert_bitwise_equal(y, y_ref)
        assert_bitwise_equal(dx, dx_ref)


def test_xla_hlo_is_plain_ops_with_no_custom_call():
    x = tf.ones([8])
    hlo = jit_fwd_bwd.experimental_get_compiler_ir(x, x, tf.constant(2.0))(stage="hlo")
    assert "custom-call" not in hlo and "custom_call" not in hlo
    assert "multiply" in hlo


def test_xla_second_order():
    @tf.function(jit_compile=True)
    def hessian_diag(x):
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                loss = tf.reduce_sum(grad_reverse.grad_reverse(x, 3.0) ** 3)
            g = inner.gradient(loss, x)
            g_sum = tf.reduce_sum(g)
        return g, outer.gradient(g_sum, x)

    x = tf.constant([1.0, -2.0, 0.5])
    g, h = hessian_diag(x)
    np.testing.assert_allclose(g.numpy(), -9.0 * x.numpy() ** 2, rtol=1e-6)
    np.testing.assert_allclose(h.numpy(), 54.0 * x.numpy(), rtol=1e-6)


def test_xla_variable_lambda_takes_effect_without_retracing():
    lambda_ = tf.Variable(1.0)

    @tf.function(jit_compile=True)
    def step(x):
        return fwd_bwd(x, tf.ones_like(x), lambda_)[1]

    for value in [1.0, 0.5, 6.0]:
        lambda_.assign(value)
        assert_bitwise_equal(step(tf.ones([5])), np.full(5, -value, np.float32))
    assert step.experimental_get_tracing_count() == 1


def compiled_op_types(fn, *args) -> set:
    """The op types of the graph that `tf.function(fn, jit_compile=True)` hands to XLA."""
    graph = tf.function(fn, jit_compile=True).get_concrete_function(*args).graph
    return {op.type for op in graph.get_operations()}


def test_xla_compiles_the_native_op_exactly_when_the_build_has_xla_kernels():
    """The HLO cannot tell the native op from the pure-Python version (by
    design), so the graph XLA compiles must: GradReverse and GradReverseGrad
    where the build record says XLA kernels exist, tf.custom_gradient's
    IdentityN where it says they do not."""
    x = tf.ones([3])
    ops = compiled_op_types(lambda x: fwd_bwd(x, tf.ones_like(x), 2.0), x)
    if grad_reverse.BUILD_INFO["xla"]:
        assert {"GradReverse", "GradReverseGrad"} <= ops and "IdentityN" not in ops, ops
        assert "XLA_CPU_JIT" in xla_fallback.kernel_devices("GradReverse")
    else:
        assert "IdentityN" in ops and not {"GradReverse", "GradReverseGrad"} & ops, ops
    y, dx = tf.function(fwd_bwd, jit_compile=True)(x, tf.ones_like(x), tf.constant(2.0))
    assert_bitwise_equal(dx, [-2.0, -2.0, -2.0])


def test_keras_layer_under_xla_uses_the_native_op_when_the_build_has_xla_kernels():
    layer = grad_reverse.GradReverse(0.5)
    ops = compiled_op_types(
        lambda x: forward_backward(lambda t, _: layer(t, training=True), x, x, None), tf.ones([2, 3])
    )
    assert ("GradReverse" in ops) == bool(grad_reverse.BUILD_INFO["xla"]), ops


@needs_xla_kernels
def test_xla_rejects_a_non_finite_constant_lambda_at_compile_time():
    @tf.function(jit_compile=True)
    def step(x):
        return grad_reverse.ops.LIBRARY.module.grad_reverse_grad(x, tf.constant(float("nan")))

    with pytest.raises(tf.errors.InvalidArgumentError, match="lambda_ must be finite"):
        step(tf.ones([2]))


def test_keras_fit_with_jit_compile_trains_the_dann_model():
    x, y = batch(256)
    model = dann_model(grad_reverse.GradReverse(lambda_=1.0))
    model.compile(
        optimizer=keras.optimizers.Adam(0.01),
        jit_compile=True,
        loss={"label": "binary_crossentropy", "domain": "binary_crossentropy"},
    )
    if grad_reverse.BUILD_INFO["xla"]:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # no fallback warning
            history = model.fit(x, y, batch_size=64, epochs=3, verbose=0)
        assert "XLA_CPU_JIT" in xla_fallback.kernel_devices("GradReverse")
    else:  # a build without XLA kernels still trains, through the pure-Python version
        xla_fallback._warned = False
        with pytest.warns(RuntimeWarning, match="built without XLA kernels"):
            history = model.fit(x, y, batch_size=64, epochs=3, verbose=0)
    assert history.history["label_loss"][-1] < history.history["label_loss"][0]


def test_without_native_xla_kernels_falls_back_to_the_reference_with_one_warning(monkeypatch):
    monkeypatch.setattr(xla_fallback, "_warned", False)
    no_xla = dict(grad_reverse.BUILD_INFO, xla=False)
    monkeypatch.setattr(grad_reverse.ops, "BUILD_INFO", no_xla)

    @tf.function(jit_compile=True)
    def step(x):
        return fwd_bwd(x, tf.ones_like(x), 2.0)

    with pytest.warns(RuntimeWarning, match="built without XLA kernels"):
        y, dx = step(tf.ones([3]))
    assert_bitwise_equal(dx, [-2.0, -2.0, -2.0])
    ops = {op.type for op in step.get_concrete_function(tf.ones([3])).graph.get_operations()}
    assert "GradReverse" not in ops


LATE_IMPORT = textwrap.dedent(
    """
    import warnings
    import numpy as np
    import tensorflow as tf
    # XLA compiles (and TensorFlow registers its XLA kernels) before the import.
    print(tf.function(lambda x: x * 2.0, jit_compile=True)(tf.constant(1.0)).numpy())
    warnings.simplefilter("error", RuntimeWarning)
    import grad_reverse
    import keras
    from grad_reverse._native import xla_fallback
    assert "XLA_CPU_JIT" in xla_fallback.kernel_devices("GradReverse"), xla_fallback.kernel_devices("GradReverse")
    assert grad_reverse.BUILD_INFO["late_xla_kernels"] > 0
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 4)).astype("float32")
    y = (x[:, :1] > 0).astype("float32")
    inputs = keras.Input((4,))
    h = keras.layers.Dense(8, activation="relu")(inputs)
    out = keras.layers.Dense(1, activation="sigmoid")(grad_reverse.GradReverse(0.5)(h))
    model = keras.Model(inputs, out)
    model.compile(optimizer="adam", loss="binary_crossentropy", jit_compile=True)
    history = model.fit(x, y, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    print("late import trained under XLA")
    """
)


@needs_xla_kernels
def test_import_after_tensorflow_registered_its_xla_kernels_still_compiles_natively():
    result = subprocess.run([sys.executable, "-c", LATE_IMPORT], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "late import trained under XLA" in result.stdout


def _hlo_instructions(layer, x, dy, lambda_):
    """The optimized HLO's instructions, opcode and shape only (no names or metadata)."""
    import re

    def step(x, dy):
        return forward_backward(layer, x, dy, lambda_)[1]

    hlo = tf.function(step, jit_compile=True).experimental_get_compiler_ir(x, dy)(stage="optimized_hlo")
    instructions = []
    for line in hlo.splitlines():
        match = re.match(r"\s*(ROOT )?%\S+ = (\S+) (\w+)\(", line)
        if match:
            instructions.append((match.group(2), match.group(3)))
    return instructions


@needs_xla_kernels
def test_xla_compiles_native_and_pure_python_to_the_same_hlo(dtype):
    """So under XLA the native op cannot be slower than the pure-Python version."""
    from grad_reverse import reference

    x = random_tensor([1024], dtype)
    lambda_ = tf.Variable(0.5)
    native = _hlo_instructions(grad_reverse.grad_reverse, x, x, lambda_)
    pure = _hlo_instructions(reference.grad_reverse, x, x, lambda_)
    assert native and native == pure
