"""How `lambda_` reaches the op (grad_reverse.ops.lambda_input): a float32
scalar tensor or tf.Variable is passed as it is (the op reads a variable at
every call, no read in Python), a keras.Variable stands for the tf.Variable it
holds, a Python number becomes a cached eager constant (at most 256 of them),
and anything else is converted, or refused with a clear error (the exact
messages are checked: they say what was wrong and what is accepted)."""

import numpy as np
import pytest
import tensorflow as tf

import grad_reverse
from grad_reverse import ops
from grad_reverse._keras import KERAS_3, keras


def test_float32_scalar_tensors_and_variables_pass_through_unread():
    tensor, variable = tf.constant(0.5), tf.Variable(0.5)
    assert ops.lambda_input(tensor) is tensor
    assert ops.lambda_input(variable) is variable


@pytest.mark.skipif(not KERAS_3, reason="keras.Variable is Keras 3 only")
def test_a_keras_variable_stands_for_the_tf_variable_it_holds():
    variable = keras.Variable(0.5)
    assert ops.lambda_input(variable) is variable.value


@pytest.mark.parametrize("make", [lambda: tf.constant([0.5]), lambda: tf.Variable([0.5])], ids=["tensor", "variable"])
def test_a_float32_non_scalar_is_refused_before_the_op(make):
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        ops.lambda_input(make())
    assert raised.value.message == "lambda_ must be a scalar (shape []), got shape [1]"


def test_other_dtypes_are_cast_to_a_float32_scalar():
    for value in (tf.constant(2, tf.int32), tf.constant(2.0, tf.float64), tf.Variable(2.0, dtype=tf.float64)):
        converted = ops.lambda_input(value)
        assert converted.dtype == tf.float32 and converted.shape.rank == 0
        assert float(converted.numpy()) == 2.0


def test_python_numbers_become_cached_eager_constants_and_the_cache_is_bounded():
    ops._EAGER_CONSTANTS.clear()
    first = ops.lambda_input(0.3)
    assert ops.lambda_input(0.3) is first  # built once
    assert first.dtype == tf.float32 and float(first.numpy()) == np.float32(0.3)
    for k in range(300):
        ops.lambda_input(1.0 + k / 1024)
        assert len(ops._EAGER_CONSTANTS) <= 256


@pytest.mark.parametrize(
    "lambda_, error, message",
    [
        (True, TypeError, "lambda_ must be a real number or a float scalar tensor, got a bool"),
        (tf.constant("a"), TypeError, "lambda_ must be a real number or a float scalar tensor, got dtype string"),
        (float("nan"), tf.errors.InvalidArgumentError, "lambda_ must be finite, got nan"),
        (-float("inf"), tf.errors.InvalidArgumentError, "lambda_ must be finite, got -inf"),
    ],
    ids=["bool", "string", "nan", "-inf"],
)
def test_bad_lambdas_get_errors_that_say_what_is_accepted(lambda_, error, message):
    with pytest.raises(error) as raised:
        ops.lambda_input(lambda_)
    text = raised.value.message if isinstance(raised.value, tf.errors.OpError) else str(raised.value)
    assert text == message


def test_an_unsupported_x_dtype_error_lists_the_supported_ones():
    with pytest.raises(TypeError) as raised:
        grad_reverse.grad_reverse(tf.zeros([2], tf.int32))
    assert str(raised.value) == "grad_reverse supports float16, bfloat16, float32, float64; got a tensor of dtype int32"


@pytest.mark.parametrize(
    "lambda_, says", [(None, "got None"), (object(), "got object <object")], ids=["none", "object"]
)
def test_a_lambda_of_no_accepted_kind_is_a_type_error_naming_lambda_and_what_is_accepted(lambda_, says):
    with pytest.raises(TypeError) as raised:
        grad_reverse.grad_reverse(tf.zeros([2]), lambda_)
    message = str(raised.value)
    assert message.startswith(f"lambda_ must be {ops.LAMBDA_ACCEPTED}, {says}")
    assert "a real number, a float scalar tensor or a scalar tf.Variable" in message
