"""A non-finite lambda, over the whole grid: eager, tf.function and XLA x a
Python number, a tensor made in the function (a constant), a tensor passed in
(a run-time value) and a tf.Variable.

Where the value is known before the step runs (a number, a constant), it is
an error in every mode. Where it is only known at run time, the kernels check
it (eager, tf.function); XLA has no run-time errors (its Assert and, on CPU,
its CheckNumerics compile to nothing), so there the gradient is -lambda * dy
in IEEE arithmetic: NaN for a NaN lambda, +-inf (NaN where dy is 0) for an
infinite one. The layer and the schedule refuse non-finite values given to
them (tests/op/test_schedule.py), so only a variable the user assigns
themselves, or a tensor passed into an XLA function, reaches that cell.
"""

import numpy as np
import pytest
import tensorflow as tf

import grad_reverse
from helpers.tensors import forward_backward

MODES = ["eager", "tf.function", "xla"]
KINDS = ["number", "constant", "argument", "variable"]
DY = np.array([1.0, -2.0, 0.0], np.float32)


def gradient(mode: str, kind: str, value: float) -> np.ndarray:
    """dx of grad_reverse for `lambda_` of `kind` holding `value`, in `mode`."""
    variable = tf.Variable(value) if kind == "variable" else None

    def step(x, dy, lambda_argument):
        lambda_ = {"number": value, "constant": tf.constant(value), "argument": lambda_argument, "variable": variable}[
            kind
        ]
        return forward_backward(grad_reverse.grad_reverse, x, dy, lambda_)[1]

    if mode != "eager":
        step = tf.function(step, jit_compile=mode == "xla")
    return step(tf.ones([3]), tf.constant(DY), tf.constant(value)).numpy()


def cell_raises(mode: str, kind: str) -> bool:
    """Where the promise holds: an InvalidArgumentError naming the problem."""
    if kind == "number":
        return True  # checked in Python, before any tracing or compiling
    if mode != "xla":
        return True  # the CPU/GPU kernels check lambda at every call
    # XLA: only a compile-time constant can be checked, by the library's own XLA kernel.
    return kind == "constant" and bool(grad_reverse.BUILD_INFO["xla"])


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", MODES)
def test_non_finite_lambda_grid(mode, kind, value):
    if cell_raises(mode, kind):
        with pytest.raises(tf.errors.InvalidArgumentError, match="lambda_ must be finite"):
            gradient(mode, kind, value)
        return
    # The documented behaviour where no check can run: IEEE -lambda * dy.
    with np.errstate(invalid="ignore"):
        expected = -np.float32(value) * DY
    np.testing.assert_array_equal(gradient(mode, kind, value), expected)


def test_the_grid_promises_an_error_in_all_but_the_xla_run_time_cells():
    silent = {(m, k) for m in MODES for k in KINDS if not cell_raises(m, k)}
    expected = {("xla", "argument"), ("xla", "variable")}
    if not grad_reverse.BUILD_INFO["xla"]:
        expected.add(("xla", "constant"))  # the pure-Python fallback has no compile-time check
    assert silent == expected


@pytest.mark.parametrize(
    "lambda_",
    [float("nan"), float("inf"), np.float32("-inf"), tf.constant(float("nan"))],
    ids=["nan", "inf", "numpy -inf", "eager tensor nan"],
)
def test_layer_refuses_a_non_finite_number_or_eager_tensor(lambda_):
    with pytest.raises(ValueError, match=r"^lambda_ must be finite, got -?(nan|inf)$"):
        grad_reverse.GradReverse(lambda_=lambda_)


def test_layer_with_a_variable_lambda_follows_the_grid():
    """A variable is read by the op at each step: an error outside XLA."""
    variable = tf.Variable(1.0)
    layer = grad_reverse.GradReverse(lambda_=variable)
    variable.assign(float("nan"))
    with pytest.raises(tf.errors.InvalidArgumentError, match="lambda_ must be finite"):
        forward_backward(lambda x, _: layer(x, training=True), tf.ones([2]), tf.ones([2]), None)
