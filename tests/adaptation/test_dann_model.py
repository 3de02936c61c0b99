"""`grad_reverse.DANN`: what fit trains (label loss on source points only,
domain loss on both, reversed into the features), the lambda it uses at
each step (the paper's ramp across fits, initial_epoch, steps_per_execution,
XLA), a constant lambda, mixed precision (CDAN's and MDD's too),
predict/evaluate, the logs, and the learning-rate schedule."""

import math

import numpy as np
import pytest
import tensorflow as tf

from grad_reverse._keras import keras
from grad_reverse.adaptation import DANN, DANNLearningRateSchedule
from grad_reverse.adaptation.training import keras_compat
from grad_reverse.schedule import dann_lambda
from helpers.models import REVERSAL_MODELS, RecordW, compile_reversal, dann, domains, ones, parts, reversal_dann
from helpers.tensors import ramp


def bits(arrays):
    return [np.asarray(a).view(np.uint32) for a in arrays]


# --- what fit trains -------------------------------------------------------------


def test_fit_logs_label_and_domain_values_and_predicts_with_the_label_path():
    x_source, y_source, x_target = domains()
    model = dann()
    model.compile(keras.optimizers.Adam(0.02), "binary_crossentropy", ["accuracy"])
    history = model.fit(x_source, y_source, target=x_target, batch_size=32, epochs=3, verbose=0)
    assert set(history.history) == {"loss", "accuracy", "domain_loss", "domain_accuracy", "lambda"}
    for values in history.history.values():
        assert len(values) == 3 and all(math.isfinite(v) for v in values)
    assert 0.0 <= min(history.history["domain_accuracy"]) <= max(history.history["domain_accuracy"]) <= 1.0
    # Calling the model is the label path: label_head(feature_extractor(x)).
    expected = model.label_head(model.feature_extractor(x_target))
    np.testing.assert_allclose(model.predict(x_target, verbose=0), expected, rtol=1e-6)
    np.testing.assert_allclose(model(x_target, training=False), expected, rtol=1e-6)
    # evaluate scores labeled points (of either domain) with the label loss and metrics only.
    scores = model.evaluate(x_source, y_source, verbose=0, return_dict=True)
    assert set(scores) == {"loss", "accuracy"}
    p = np.asarray(model.predict(x_source, verbose=0)).reshape(-1)
    bce = -np.mean(y_source[:, 0] * np.log(p) + (1 - y_source[:, 0]) * np.log(1 - p))
    assert scores["loss"] == pytest.approx(bce, rel=1e-4)
    assert scores["accuracy"] == pytest.approx(np.mean((p > 0.5) == (y_source[:, 0] > 0.5)))


def test_the_logged_loss_is_the_label_loss_of_the_source_points():
    x_source, y_source, x_target = domains()
    model = dann()
    model.compile(keras.optimizers.SGD(0.0), "binary_crossentropy")  # lr 0: the weights stay
    history = model.fit(
        x_source, y_source, target=x_target, batch_size=64, epochs=1, steps_per_epoch=1, shuffle=False, verbose=0
    )
    batch = x_source[:32]
    p = np.asarray(model(batch)).reshape(-1)
    y = y_source[:32, 0]
    assert history.history["loss"][0] == pytest.approx(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)), rel=1e-5)
    assert float(keras_compat.label_loss_tracker(model).result()) == pytest.approx(history.history["loss"][0])


def test_the_label_loss_ignores_the_target_points():
    """With lambda 0 the features learn from the label loss only: garbage
    target points give bitwise the weights that zeros give, and those of a
    plain source-only model trained on the same source batches."""
    x_source, y_source, x_target = domains()
    trained = {}
    for name, target in (
        ("zeros", np.zeros_like(x_target)),
        ("garbage", np.random.default_rng(9).standard_normal(x_target.shape).astype("float32") * 1e3),
    ):
        model = dann(lambda_schedule="constant", lambda_max=0.0)
        model.compile(keras.optimizers.SGD(0.1), "binary_crossentropy")
        model.fit(x_source, y_source, target=target, batch_size=32, epochs=2, shuffle=False, verbose=0)
        trained[name] = model

    def label_weights(m):
        return m.feature_extractor.get_weights() + m.label_head.get_weights()

    for a, b in zip(bits(label_weights(trained["zeros"])), bits(label_weights(trained["garbage"]))):
        np.testing.assert_array_equal(a, b)
    # The target did reach the domain head.
    assert any(
        not np.array_equal(a, b)
        for a, b in zip(trained["zeros"].domain_head.get_weights(), trained["garbage"].domain_head.get_weights())
    )
    # The oracle: the same network without the domain part, on the same source batches.
    feature_extractor, label_head, _ = parts(0)
    plain = keras.Sequential([feature_extractor, label_head])
    plain.compile(keras.optimizers.SGD(0.1), "binary_crossentropy")
    plain.fit(x_source, y_source, batch_size=16, epochs=2, shuffle=False, verbose=0)
    for a, b in zip(label_weights(trained["zeros"]), plain.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_the_domain_gradient_reaches_the_features_reversed_and_scaled_by_lambda():
    model = reversal_dann(lambda_schedule="constant", lambda_max=0.7)
    compile_reversal(model)
    record = RecordW()
    x, y, target = ones(8)
    model.fit(x, y, target=target, batch_size=8, epochs=1, steps_per_epoch=3, verbose=0, callbacks=[record])
    # d loss / d w = -lambda; SGD(1) adds lambda per step (no reversal: subtracts it).
    np.testing.assert_allclose(np.diff(record.w), [0.7] * 3, rtol=1e-6)


# --- lambda at each step -----------------------------------------------------------


def test_lambda_follows_the_paper_ramp_per_step_across_two_fits_and_resumes_at_initial_epoch():
    model = reversal_dann(lambda_max=2.0)
    compile_reversal(model)
    x, y, target = ones(4)
    record = RecordW()
    history = model.fit(x, y, target=target, batch_size=8, epochs=2, steps_per_epoch=3, verbose=0, callbacks=[record])
    expected = ramp(range(6), 6, lambda_max=2.0)
    np.testing.assert_allclose(np.diff(record.w), expected, rtol=1e-5)
    assert history.history["lambda"] == pytest.approx([expected[2], expected[5]], rel=1e-6)
    # A second fit ramps over its own steps from 0 again.
    model.fit(x, y, target=target, batch_size=8, epochs=1, steps_per_epoch=4, verbose=0, callbacks=[record])
    np.testing.assert_allclose(np.diff(record.w), ramp(range(4), 4, lambda_max=2.0), rtol=1e-5)
    # initial_epoch=1 of 3 epochs of 2 steps: steps 2..5 of a 6-step ramp.
    model.fit(
        x, y, target=target, batch_size=8, epochs=3, initial_epoch=1, steps_per_epoch=2, verbose=0, callbacks=[record]
    )
    np.testing.assert_allclose(np.diff(record.w), ramp(range(2, 6), 6, lambda_max=2.0), rtol=1e-5)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_lambda_is_exact_per_step_with_several_steps_per_execution(jit_compile):
    model = reversal_dann(gamma=3.0)
    compile_reversal(model, steps_per_execution=3, jit_compile=jit_compile)
    x, y, target = ones(4)
    record = RecordW()
    model.fit(x, y, target=target, batch_size=8, epochs=1, steps_per_epoch=6, verbose=0, callbacks=[record])
    # Callbacks run once per execution: each change is the sum of three steps' lambdas.
    per_step = ramp(range(6), 6, gamma=3.0)
    np.testing.assert_allclose(np.diff(record.w), [sum(per_step[:3]), sum(per_step[3:])], rtol=1e-5)


def test_a_custom_loop_places_the_ramp_with_set_schedule_steps():
    model = reversal_dann()
    compile_reversal(model)
    x, y, target = ones(4)
    model.fit(x, y, target=target, batch_size=8, epochs=1, steps_per_epoch=1, verbose=0)  # builds everything
    model.set_schedule_steps(11, step=5)
    assert float(model.current_lambda()) == pytest.approx(dann_lambda(0.5), rel=1e-6)
    model.train_step(((tf.constant(x), tf.constant(target)), tf.constant(y)))
    assert float(model.current_lambda()) == pytest.approx(dann_lambda(0.6), rel=1e-6)
    with pytest.raises(ValueError, match="total_steps"):
        model.set_schedule_steps(0)


# --- precision, XLA -----------------------------------------------------------------


@pytest.mark.parametrize("method", sorted(REVERSAL_MODELS))
def test_mixed_precision_trains_with_float16_features_and_reverses_the_gradient(method):
    """DANN's, CDAN(+E)'s and MDD's step under mixed_float16 (loss scaling included)."""
    policy = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = REVERSAL_MODELS[method](lambda_schedule="constant", lambda_max=0.5)
        compile_reversal(model)
    finally:
        keras.mixed_precision.set_global_policy(policy)
    x, y, target = ones(8)
    record = RecordW()
    history = model.fit(x, y, target=target, batch_size=16, epochs=1, steps_per_epoch=3, verbose=0, callbacks=[record])
    assert model.feature_extractor(x).dtype == tf.float16
    np.testing.assert_allclose(np.diff(record.w), [0.5] * 3, rtol=1e-3)
    assert all(math.isfinite(v) for values in history.history.values() for v in values)


def test_jit_compile_trains_the_same_as_graph_mode():
    x_source, y_source, x_target = domains()
    weights = []
    for jit_compile in (False, True):
        model = dann()
        model.compile(keras.optimizers.SGD(0.1), "binary_crossentropy", jit_compile=jit_compile)
        model.fit(x_source, y_source, target=x_target, batch_size=32, epochs=2, seed=1, verbose=0)
        weights.append(model.get_weights())
    for a, b in zip(*weights):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


# --- the learning-rate schedule -------------------------------------------------------


def test_learning_rate_schedule_is_the_papers_decay_and_round_trips_through_its_config():
    schedule = DANNLearningRateSchedule(0.01, decay_steps=100, alpha=10.0, beta=0.75)
    for step in (0, 1, 50, 100, 250):
        p = min(step / 100, 1.0)
        assert float(schedule(step)) == pytest.approx(0.01 / (1 + 10 * p) ** 0.75, rel=1e-6)
    again = DANNLearningRateSchedule.from_config(schedule.get_config())
    assert again.get_config() == schedule.get_config()
    restored = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert isinstance(restored, DANNLearningRateSchedule) and float(restored(50)) == pytest.approx(float(schedule(50)))
    for bad in ({"decay_steps": 0}, {"decay_steps": 2.5}, {"alpha": float("nan")}):
        with pytest.raises(ValueError):
            DANNLearningRateSchedule(**bad)


def test_the_class_is_exported_by_the_package():
    import grad_reverse

    assert grad_reverse.DANN is DANN and grad_reverse.DANNLearningRateSchedule is DANNLearningRateSchedule
    assert issubclass(DANN, keras.Model)
