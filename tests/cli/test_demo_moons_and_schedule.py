"""The moons generator of the demo and the DANN lambda schedule: the moons'
geometry and seeding, the schedule's values and its effect on fit-time
gradients (one lambda per batch, no retracing)."""

import math

import numpy as np
import pytest
import tensorflow as tf

import grad_reverse
from grad_reverse._keras import KERAS_3, keras
from grad_reverse.demo import data
from grad_reverse.schedule import DANNLambdaSchedule, dann_lambda
from helpers.models import RecordW
from helpers.tensors import unknown_length_dataset

# --- the moons ---------------------------------------------------------------


def test_make_moons_shapes_labels_and_dtype():
    x, y = data.make_moons(150, 0.05, np.random.default_rng(0))
    assert x.shape == (300, 2) and y.shape == (300,)
    assert x.dtype == np.float32 and y.dtype == np.float32
    np.testing.assert_array_equal(y, np.r_[np.zeros(150), np.ones(150)])


def test_noise_free_moons_lie_on_two_half_circles_around_the_origin():
    x, y = data.make_moons(200, 0.0, np.random.default_rng(1))
    # Unit half circles centred at (0, 0) and (1, 0.5), centred on (0.5, 0.25)
    # and doubled: radius 2 around (-1, -0.5) and (1, 0.5).
    upper, lower = x[y == 0], x[y == 1]
    np.testing.assert_allclose(np.linalg.norm(upper - [-1.0, -0.5], axis=1), 2.0, rtol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(lower - [1.0, 0.5], axis=1), 2.0, rtol=1e-5)
    assert (upper[:, 1] >= -0.5 - 1e-5).all() and (lower[:, 1] <= 0.5 + 1e-5).all()
    assert np.abs(x.mean(axis=0)).max() < 0.2  # centred


def test_rotate_keeps_distances_and_turns_every_point_by_the_angle():
    x, _ = data.make_moons(50, 0.05, np.random.default_rng(2))
    r = data.rotate(x, 35.0)

    def pairwise(p):
        return np.linalg.norm(p[:, None, :] - p[None, :, :], axis=-1)

    np.testing.assert_allclose(pairwise(r), pairwise(x), atol=1e-5)
    angle = np.degrees(np.arctan2(x[:, 0] * r[:, 1] - x[:, 1] * r[:, 0], (x * r).sum(axis=1)))
    np.testing.assert_allclose(angle, 35.0, atol=1e-3)  # counter-clockwise
    np.testing.assert_allclose(data.rotate(r, -35.0), x, atol=1e-5)


def test_target_domain_is_an_independent_sample_rotated_by_35_degrees():
    domains = data.make_domains(3, noise=0.0)
    assert domains.x_source.shape == domains.x_target.shape == (300, 2)
    back = data.rotate(domains.x_target, -35.0)
    np.testing.assert_allclose(np.linalg.norm(back[domains.y_target == 0] - [-1.0, -0.5], axis=1), 2.0, rtol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(back[domains.y_target == 1] - [1.0, 0.5], axis=1), 2.0, rtol=1e-5)
    assert not np.allclose(back, domains.x_source)  # fresh points, not the source rotated


def test_make_domains_is_seeded():
    a, b, c = data.make_domains(5), data.make_domains(5), data.make_domains(6)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a.x_source, c.x_source)


# --- the schedule ------------------------------------------------------------


def test_dann_lambda_starts_at_0_ends_near_lambda_max_and_rises_monotonically():
    assert dann_lambda(0.0) == 0.0
    assert dann_lambda(1.0) == pytest.approx(1.0, abs=1e-4)
    assert dann_lambda(1.0, lambda_max=6.0) == pytest.approx(6.0, abs=1e-3)
    assert dann_lambda(0.5, gamma=10.0) == pytest.approx(2.0 / (1.0 + math.exp(-5.0)) - 1.0)
    values = [dann_lambda(p) for p in np.linspace(0.0, 1.0, 101)]
    assert all(b > a for a, b in zip(values, values[1:]))
    assert dann_lambda(-0.5) == 0.0 and dann_lambda(2.0) == dann_lambda(1.0)  # clipped


class CountTraces(keras.layers.Layer):
    """Identity whose Python `call` counts how often it runs, i.e. is traced."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.traces = 0

    def call(self, inputs):
        self.traces += 1
        return inputs


def reversal_model(lambda_):
    """loss = w * x with x = 1 behind GradReverse: dloss/dw = -lambda, so with
    SGD(1) each step adds the lambda of that step to w."""
    inputs = keras.Input((1,))
    counter = CountTraces()
    w = keras.layers.Dense(1, use_bias=False, kernel_initializer="ones", name="w")
    model = keras.Model(inputs, counter(grad_reverse.GradReverse(lambda_)(w(inputs))))
    model.compile(keras.optimizers.SGD(1.0), loss=lambda y_true, y_pred: y_pred)
    return model, counter


def record_w() -> RecordW:
    """`w` of a plain Keras model (its layer "w") before training and after each batch."""
    return RecordW(lambda model: model.get_layer("w"))


def ones_dataset():
    return tf.data.Dataset.from_tensors((np.ones((4, 1), "float32"), np.zeros((4, 1), "float32"))).repeat()


@pytest.mark.parametrize(
    "make_variable",
    [
        lambda: tf.Variable(0.0, trainable=False),
        pytest.param(
            lambda: keras.Variable(0.0, trainable=False),
            marks=pytest.mark.skipif(not KERAS_3, reason="keras.Variable is Keras 3 only"),
        ),
    ],
    ids=["tf.Variable", "keras.Variable"],
)
def test_schedule_assigns_lambda_before_each_batch_and_fit_uses_it_without_retracing(make_variable):
    lambda_ = make_variable()
    model, counter = reversal_model(lambda_)
    record = record_w()
    traces = RecordTraces(counter)
    history = model.fit(
        ones_dataset(),
        epochs=2,
        steps_per_epoch=3,
        shuffle=False,
        verbose=0,
        callbacks=[DANNLambdaSchedule(lambda_, lambda_max=2.0), record, traces],
    )
    expected = [dann_lambda(step / 5, lambda_max=2.0) for step in range(6)]
    np.testing.assert_allclose(np.diff(record.w), expected, rtol=1e-5, atol=1e-6)
    assert float(lambda_.numpy()) == pytest.approx(expected[-1])
    assert history.history["lambda"] == pytest.approx([expected[2], expected[5]])
    # Six lambdas, no retrace after the first step traced the train function
    # (Keras 3 traces it once, Keras 2 twice, both on the first call): lambda
    # is an input of the op, not a constant.
    assert len(traces.after_batch) == 6 and len(set(traces.after_batch)) == 1, traces.after_batch
    traced = traces.after_batch[0]

    # A second fit restarts the ramp, on the same traced train function.
    model.fit(
        ones_dataset(),
        epochs=1,
        steps_per_epoch=4,
        shuffle=False,
        verbose=0,
        callbacks=[DANNLambdaSchedule(lambda_, gamma=3.0), record, traces],
    )
    np.testing.assert_allclose(
        np.diff(record.w), [dann_lambda(s / 3, gamma=3.0) for s in range(4)], rtol=1e-5, atol=1e-6
    )
    assert set(traces.after_batch) == {traced}


class RecordTraces(keras.callbacks.Callback):
    """How many times the model's call had been traced after each batch."""

    def __init__(self, counter):
        super().__init__()
        self.counter = counter
        self.after_batch = []

    def on_train_batch_end(self, batch, logs=None):
        self.after_batch.append(self.counter.traces)


# Keras warns when a dataset of unknown length ends, which is how it learns the length.
@pytest.mark.filterwarnings("ignore:Your input ran out of data")
def test_schedule_with_an_unknown_number_of_steps_needs_total_steps():
    lambda_ = tf.Variable(0.0, trainable=False)
    model, _ = reversal_model(lambda_)
    with pytest.raises(ValueError, match="total_steps"):
        model.fit(unknown_length_dataset(3), shuffle=False, verbose=0, callbacks=[DANNLambdaSchedule(lambda_)])
    record = record_w()
    model.fit(
        unknown_length_dataset(3),
        shuffle=False,
        verbose=0,
        callbacks=[DANNLambdaSchedule(lambda_, total_steps=3), record],
    )
    np.testing.assert_allclose(np.diff(record.w), [dann_lambda(s / 2) for s in range(3)], rtol=1e-5, atol=1e-6)
