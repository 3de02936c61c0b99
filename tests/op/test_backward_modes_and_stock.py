"""The two backwards at work: each GRAD_REVERSE_BACKWARD mode run in a fresh
process (the variable is read once, at import), and the stock-ops backward
compared bit for bit with the native kernel on the CPU, every float16 and
bfloat16 value included. Which backward is chosen, and why, is in
test_backward.py.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from grad_reverse import ops
from grad_reverse._native import backward_choice
from helpers.tensors import LAMBDAS, assert_bitwise_equal

PROBE = Path(__file__).with_name("backward_probe.py")


# --------------------------------------------------- the modes, run ----


def run_probe(value: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, GRAD_REVERSE_BACKWARD=value, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable, str(PROBE)], env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def probes():
    results = {}
    for mode in ("native", "stock"):
        result = run_probe(mode)
        assert result.returncode == 0, result.stderr[-3000:]
        results[mode] = json.loads(result.stdout.splitlines()[-1])
    return results


def test_gradient_graph_holds_grad_reverse_grad_in_native_mode_and_only_stock_ops_in_stock_mode(probes):
    assert probes["native"]["backward"]["kernel"] == "native"
    assert probes["stock"]["backward"] == {
        "mode": "stock",
        "kernel": "stock",
        "reason": "chosen by GRAD_REVERSE_BACKWARD=stock",
    }
    for dtype in ("float16", "bfloat16", "float32", "float64"):
        assert probes["native"]["op_types"][dtype] == ["GradReverseGrad"]
    widened = ["Cast", "Mul", "Neg", "StopGradient"]
    assert probes["stock"]["op_types"] == {
        "float16": widened,
        "bfloat16": widened,
        "float64": widened,
        "float32": ["Mul", "Neg", "StopGradient"],
    }


def test_second_order_gradients_are_the_same_in_both_modes_eager_function_and_xla(probes):
    x = np.array(probes["native"]["x"], np.float32)
    lam = np.float32(0.3)
    for mode in ("native", "stock"):
        for run, result in probes[mode]["second_order"].items():
            np.testing.assert_allclose(result["g"], -2 * lam * x, rtol=1e-6, err_msg=f"{mode} {run}")
            np.testing.assert_allclose(result["h"], np.full_like(x, 2 * lam * lam), rtol=1e-6, err_msg=f"{mode} {run}")
            assert result["to_lambda"] is None, (mode, run)  # lambda receives no gradient, at any order
    assert probes["stock"]["second_order"] == probes["native"]["second_order"]


def test_indexed_slices_stay_sparse_in_both_modes(probes):
    for mode in ("native", "stock"):
        assert probes[mode]["indexed_slices"]["type"] == "IndexedSlices"
    expected = np.zeros([6, 2])
    expected[[1, 4]] = [-0.5, -1.0]
    np.testing.assert_array_equal(probes["stock"]["indexed_slices"]["dense"], expected)
    assert probes["stock"]["indexed_slices"] == probes["native"]["indexed_slices"]


def test_import_fails_on_an_unknown_value_naming_the_accepted_ones():
    env = dict(os.environ, GRAD_REVERSE_BACKWARD="fastest", TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        [sys.executable, "-c", "import grad_reverse"], env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode != 0
    assert (
        "ValueError: GRAD_REVERSE_BACKWARD='fastest' is not a valid value; accepted values: "
        "auto (the default), native, stock." in result.stderr
    )


# -------------------------------------------- stock == kernel, bitwise ----


def assert_bitwise_equal_but_nan_payloads(stock, native) -> int:
    """Bitwise equal wherever the kernel's result is not a NaN; where it is,
    the stock result is a NaN too. A NaN's sign and payload (its other bits)
    may differ, as IEEE 754 allows: the kernels round float to half and
    bfloat16 in software, keep the sign and return the quiet NaN; for half,
    TensorFlow's Cast keeps the payload; for bfloat16 it returns +NaN.
    Returns how many values were compared as NaNs."""
    stock, native = stock.numpy(), native.numpy()
    assert stock.dtype == native.dtype and stock.shape == native.shape
    is_nan = np.isnan(native.astype(np.float32))
    assert_bitwise_equal(stock[~is_nan], native[~is_nan])
    assert np.isnan(stock[is_nan].astype(np.float32)).all()
    return int(is_nan.sum())


def native_and_stock(dy: tf.Tensor, lambda_: tf.Tensor):
    # lambda_ is a tensor argument (as a tf.Variable's value would be): with
    # a constant -1 in a graph, Grappler rewrites the stock `dy * 1` to an
    # identity, which passes subnormals that TensorFlow's CPU kernels,
    # the native one included, flush to zero.
    return ops.LIBRARY.module.grad_reverse_grad(dy, lambda_), backward_choice.stock_reverse(dy, lambda_)


def all_bit_patterns(dtype) -> tf.Tensor:
    return tf.bitcast(tf.constant(np.arange(1 << 16, dtype=np.uint16)), dtype)


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16], ids=lambda d: d.name)
def test_stock_backward_equals_the_kernel_bitwise_for_every_16_bit_value(dtype):
    dy = all_bit_patterns(dtype)
    nan_inputs = int(np.isnan(tf.cast(dy, tf.float32).numpy()).sum())
    assert nan_inputs == (2046 if dtype == tf.float16 else 254)  # 2 signs x (2^mantissa_bits - 1)
    compiled = tf.function(native_and_stock)
    for lambda_ in LAMBDAS + [0.3, 1e-3, -2.5]:
        for run in (native_and_stock, compiled):
            native, stock = run(dy, tf.constant(lambda_))
            # Only NaN inputs give NaN outputs: -lambda * dy is finite * finite or infinite * nonzero.
            expected_nans = nan_inputs + (2 if lambda_ == 0.0 else 0)  # 0 * +inf, 0 * -inf
            assert assert_bitwise_equal_but_nan_payloads(stock, native) == expected_nans


def special_values(dtype) -> np.ndarray:
    info = np.finfo(dtype)
    rng = np.random.default_rng(3)
    finite = np.concatenate(
        [rng.standard_normal(4000), rng.standard_normal(2000) * 1e30, rng.standard_normal(2000) * float(info.tiny) * 4]
    )
    specials = [
        0.0,
        -0.0,
        np.inf,
        -np.inf,
        np.nan,
        -np.nan,
        info.tiny,
        -info.tiny,
        info.smallest_subnormal,
        -info.smallest_subnormal,
        info.tiny - info.smallest_subnormal,
        info.max,
        -info.max,
        1.0,
        -1.0,
    ]
    return np.concatenate([np.array(specials), finite]).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_stock_backward_equals_the_kernel_bitwise_for_specials_and_subnormals(dtype):
    dy = tf.constant(special_values(dtype))
    compiled = tf.function(native_and_stock)
    for lambda_ in LAMBDAS + [0.3, 1e-3, 3e38]:
        for run in (native_and_stock, compiled):
            native, stock = run(dy, tf.constant(lambda_))
            assert_bitwise_equal(stock, native)


def test_stock_backward_keeps_shape_and_dtype_and_handles_empty_tensors(dtype):
    for shape in ([], [0], [2, 0, 3], [3, 4]):
        dy = tf.ones(shape, dtype)
        native, stock = native_and_stock(dy, tf.constant(0.5))
        assert stock.dtype == dtype and stock.shape == shape
        assert_bitwise_equal(stock, native)
