"""Defaults are part of the contract: lambda is 1 unless given (the op, the
pure-Python reference and the layer alike), and the schedule's ramp is the
paper's (gamma 10, lambda_max 1)."""

import math

import numpy as np
import pytest
import tensorflow as tf

import grad_reverse
from grad_reverse import reference
from grad_reverse.schedule import DANNLambdaSchedule, dann_lambda
from helpers.tensors import assert_bitwise_equal, forward_backward


@pytest.mark.parametrize(
    "name, fn",
    [
        ("op", lambda x, _: grad_reverse.grad_reverse(x)),
        ("reference", lambda x, _: reference.grad_reverse(x)),
        ("layer", lambda x, _: grad_reverse.GradReverse()(x, training=True)),
    ],
)
def test_lambda_defaults_to_one(name, fn):
    dy = tf.constant([1.5, -2.0, 0.25])
    _, dx = forward_backward(fn, tf.ones([3]), dy, None)
    assert_bitwise_equal(dx, -dy.numpy())


def test_layer_config_holds_the_default_lambda():
    assert grad_reverse.GradReverse().get_config()["lambda_"] == 1.0


def test_schedule_defaults_are_the_papers_ramp():
    schedule = DANNLambdaSchedule(tf.Variable(0.0))
    assert (schedule.gamma, schedule.lambda_max, schedule.total_steps) == (10.0, 1.0, None)
    for p in (0.0, 0.1, 0.5, 1.0):
        assert dann_lambda(p) == pytest.approx(2.0 / (1.0 + math.exp(-10.0 * p)) - 1.0, rel=1e-12, abs=1e-15)
    np.testing.assert_allclose(dann_lambda(1.0), 0.9999092, rtol=1e-7)
