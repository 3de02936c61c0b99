"""DANNLambdaSchedule across fits: one callback reused for a second fit
restarts the ramp, a fit resumed with `initial_epoch` continues it where it
left off, `steps_per_execution > 1` holds each value for its N steps, and the
schedule refuses arguments that would make it assign a non-finite lambda."""

import math

import numpy as np
import pytest
import tensorflow as tf

import grad_reverse
from grad_reverse._keras import keras
from grad_reverse.schedule import DANNLambdaSchedule, dann_lambda
from helpers.tensors import ramp, unknown_length_dataset


def reversal_model(lambda_):
    """loss = w * x with x = 1 behind GradReverse: dloss/dw = -lambda, so with
    SGD(1) every training step adds that step's lambda to w."""
    inputs = keras.Input((1,))
    w = keras.layers.Dense(1, use_bias=False, kernel_initializer="ones", name="w")
    model = keras.Model(inputs, grad_reverse.GradReverse(lambda_)(w(inputs)))
    model.compile(keras.optimizers.SGD(1.0), loss=lambda y_true, y_pred: y_pred)
    return model


def ones_dataset():
    return tf.data.Dataset.from_tensors((np.ones((4, 1), "float32"), np.zeros((4, 1), "float32"))).repeat()


class RecordLambdas(keras.callbacks.Callback):
    """The lambda each batch trained with (the variable's value at the batch's
    end: Keras may begin a batch that a dataset of unknown length then has no
    data for) and the weight w after each batch."""

    def __init__(self, variable):
        super().__init__()
        self.variable = variable
        self.lambdas, self.w = [], []

    def on_train_begin(self, logs=None):
        self.w = [self._w()]

    def on_train_batch_end(self, batch, logs=None):
        self.lambdas.append(float(self.variable.numpy()))
        self.w.append(self._w())

    def _w(self):
        return float(self.model.get_layer("w").get_weights()[0][0, 0])


def fit(model, schedule, record, **kwargs):
    kwargs.setdefault("epochs", 2)
    kwargs.setdefault("steps_per_epoch", 3)
    return model.fit(ones_dataset(), shuffle=False, verbose=0, callbacks=[schedule, record], **kwargs)


def test_one_schedule_reused_for_a_second_fit_restarts_the_ramp():
    lambda_ = tf.Variable(0.0, trainable=False)
    model, schedule = reversal_model(lambda_), DANNLambdaSchedule(lambda_)
    first, second = RecordLambdas(lambda_), RecordLambdas(lambda_)
    fit(model, schedule, first)
    fit(model, schedule, second, epochs=1, steps_per_epoch=4)
    np.testing.assert_allclose(first.lambdas, ramp(range(6), 6), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(second.lambdas, ramp(range(4), 4), rtol=1e-6, atol=1e-7)
    # The weight moved by exactly the lambdas assigned: the fit used them.
    np.testing.assert_allclose(np.diff(second.w), second.lambdas, rtol=1e-5, atol=1e-6)


@pytest.mark.filterwarnings("ignore:Your input ran out of data")
def test_one_schedule_with_total_steps_reused_on_data_of_unknown_length_restarts_the_ramp():
    """Without steps_per_epoch the schedule counts steps; a new fit counts from 0."""
    lambda_ = tf.Variable(0.0, trainable=False)
    model, schedule = reversal_model(lambda_), DANNLambdaSchedule(lambda_, total_steps=6)
    records = []
    for _ in range(2):
        records.append(RecordLambdas(lambda_))
        model.fit(unknown_length_dataset(3), epochs=2, shuffle=False, verbose=0, callbacks=[schedule, records[-1]])
    for record in records:  # two epochs of three steps, each fit from 0 to 1
        np.testing.assert_allclose(record.lambdas, ramp(range(6), 6), rtol=1e-6, atol=1e-7)


def test_a_fit_resumed_with_initial_epoch_continues_the_ramp():
    lambda_ = tf.Variable(0.0, trainable=False)
    model = reversal_model(lambda_)
    whole = RecordLambdas(lambda_)
    fit(model, DANNLambdaSchedule(lambda_), whole, epochs=4)
    resumed = RecordLambdas(lambda_)
    fit(reversal_model(lambda_), DANNLambdaSchedule(lambda_), resumed, epochs=4, initial_epoch=2)
    expected = ramp(range(12), 12)
    np.testing.assert_allclose(whole.lambdas, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(resumed.lambdas, expected[6:], rtol=1e-6, atol=1e-7)
    assert resumed.lambdas[0] > 0.9  # not a restart at 0


def test_steps_per_execution_holds_each_lambda_for_its_steps():
    """Keras calls the callback once per execution of N steps, with the index
    of the execution's first step: the lambda of that step trains all N."""
    lambda_ = tf.Variable(0.0, trainable=False)
    model = reversal_model(lambda_)
    model.compile(keras.optimizers.SGD(1.0), loss=lambda y_true, y_pred: y_pred, steps_per_execution=3)
    record = RecordLambdas(lambda_)
    history = fit(model, DANNLambdaSchedule(lambda_), record, epochs=2, steps_per_epoch=6)
    expected = ramp([0, 3, 6, 9], 12)
    np.testing.assert_allclose(record.lambdas, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.diff(record.w), 3 * np.array(expected), rtol=1e-5, atol=1e-6)
    assert history.history["lambda"] == pytest.approx([expected[1], expected[3]])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"gamma": float("nan")}, "gamma must be a finite number >= 0, got nan"),
        ({"gamma": float("inf")}, "gamma must be a finite number >= 0, got inf"),
        ({"gamma": -1.0}, "gamma must be a finite number >= 0, got -1.0"),
        ({"lambda_max": float("nan")}, "lambda_max must be finite in float32, got nan"),
        ({"lambda_max": -float("inf")}, "lambda_max must be finite in float32, got -inf"),
        ({"lambda_max": 1e39}, "lambda_max must be finite in float32, got 1e+39"),
        ({"total_steps": 0}, "total_steps must be at least 1, got 0"),
    ],
)
def test_schedule_refuses_arguments_that_would_assign_a_non_finite_lambda(kwargs, message):
    with pytest.raises(ValueError, match="^" + message.replace("+", r"\+") + "$"):
        DANNLambdaSchedule(tf.Variable(0.0), **kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"gamma": float("nan")}, "gamma must be a finite number >= 0, got nan"),
        ({"lambda_max": float("inf")}, "lambda_max must be finite in float32, got inf"),
        ({"progress": float("nan")}, "progress must be finite, got nan"),
    ],
)
def test_dann_lambda_refuses_non_finite_arguments(kwargs, message):
    arguments = dict({"progress": 0.5}, **kwargs)
    with pytest.raises(ValueError, match=f"^{message}$"):
        dann_lambda(**arguments)


def test_dann_lambda_is_the_papers_formula_with_progress_clipped_to_0_1():
    """Computed here independently: the ramp tests above compare the schedule
    with dann_lambda itself."""

    def paper(p, gamma=10.0, lambda_max=1.0):
        return lambda_max * (2.0 / (1.0 + math.exp(-gamma * p)) - 1.0)

    for progress, clipped in [(-0.5, 0.0), (0.0, 0.0), (0.25, 0.25), (1.0, 1.0), (1.5, 1.0), (7.0, 1.0)]:
        assert dann_lambda(progress) == pytest.approx(paper(clipped), rel=1e-12, abs=1e-15)
        assert dann_lambda(progress, gamma=3.0, lambda_max=2.0) == pytest.approx(
            paper(clipped, 3.0, 2.0), rel=1e-12, abs=1e-15
        )
    assert dann_lambda(0.0) == 0.0 and dann_lambda(1.0) == pytest.approx(0.9999092, rel=1e-7)


def test_largest_float32_lambda_max_and_steep_gamma_stay_finite():
    for progress in (0.0, 1e-9, 0.5, 1.0):
        value = dann_lambda(progress, gamma=1e6, lambda_max=3.4e38)
        assert math.isfinite(value) and math.isfinite(float(np.float32(value)))


def test_any_finite_gamma_from_zero_up_is_accepted():
    for gamma in (0.0, 0.5, 3.0):
        DANNLambdaSchedule(tf.Variable(0.0), gamma=gamma)
        assert dann_lambda(0.5, gamma=gamma) == pytest.approx(2.0 / (1.0 + math.exp(-gamma * 0.5)) - 1.0)
    assert dann_lambda(1.0, gamma=0.0) == 0.0  # a flat ramp: no reversal


def test_boundary_arguments_are_accepted():
    largest = float(np.finfo(np.float32).max)
    schedule = DANNLambdaSchedule(tf.Variable(0.0), lambda_max=largest, total_steps=1)
    assert schedule.value == 0.0  # nothing assigned yet: the ramp's start
    assert dann_lambda(1.0, lambda_max=-largest) == pytest.approx(-largest * 0.9999092, rel=1e-6)


def test_a_fit_of_unknown_length_without_total_steps_is_told_what_to_pass():
    lambda_ = tf.Variable(0.0, trainable=False)
    schedule = DANNLambdaSchedule(lambda_)
    schedule.set_params({"epochs": 1, "steps": None})
    with pytest.raises(ValueError) as raised:
        schedule.on_train_begin()
    assert str(raised.value) == (
        "DANNLambdaSchedule: this fit does not know its number of steps per epoch "
        "(a dataset of unknown length without steps_per_epoch); pass total_steps="
    )


def test_progress_spans_0_to_1_over_the_fit_and_stays_at_1_past_its_end():
    schedule = DANNLambdaSchedule(tf.Variable(0.0))
    schedule.set_params({"epochs": 1, "steps": 2})
    schedule.on_train_begin()
    schedule.on_epoch_begin(0)
    assert [schedule.progress(batch) for batch in (0, 1, 2, 5)] == [0.0, 1.0, 1.0, 1.0]


@pytest.mark.parametrize("variable, named", [(1.0, "float 1.0"), (tf.Variable(0), "int32"), (None, "NoneType None")])
def test_schedule_refuses_what_it_cannot_assign_at_construction_naming_it_and_what_is_accepted(variable, named):
    with pytest.raises(TypeError, match="variable must be a scalar float tf.Variable or keras.Variable") as error:
        DANNLambdaSchedule(variable)
    assert named in str(error.value)


def test_schedule_refuses_a_variable_of_several_values():
    with pytest.raises(ValueError, match=r"must be a scalar \(one lambda\), got shape \(2,\)"):
        DANNLambdaSchedule(tf.Variable([0.0, 0.0]))


def test_schedule_takes_a_keras_variable():
    variable = keras.Variable(0.0) if hasattr(keras, "Variable") else tf.Variable(0.0)
    assert DANNLambdaSchedule(variable).variable is variable


def test_the_in_step_schedules_are_the_one_ramp_the_callback_uses():
    from grad_reverse.schedule import lambda_at_step, ramp, scheduled_lambda, warm_start_lambda

    for step in (0, 1, 5, 9, 12):  # 12: past the fit's end, clipped
        expected = dann_lambda(step / 9, gamma=3.0, lambda_max=2.0)
        assert float(lambda_at_step(tf.constant(step), tf.constant(10), 3.0, 2.0)) == pytest.approx(expected, rel=1e-6)
        assert float(scheduled_lambda("paper", step, 10, 3.0, 2.0)) == pytest.approx(expected, rel=1e-6)
    for step in (0, 500, 1000, 3000):  # the warm start keeps rising past its steps
        expected = ramp(step / 1000, 1.0, 0.1)
        assert float(warm_start_lambda(tf.constant(step), 1000, 1.0, 0.1)) == pytest.approx(expected, rel=1e-6)
        assert float(scheduled_lambda("warm_start", step, 10, 1.0, 0.1)) == pytest.approx(expected, rel=1e-6)
    assert float(scheduled_lambda("constant", 3, 10, 3.0, 2.0)) == 2.0
