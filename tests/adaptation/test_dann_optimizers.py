"""Per-part optimizers of `grad_reverse.DANN` (`compile(part_optimizers=...)`):
a zero learning-rate scale freezes the feature extractor bitwise while the
heads train, a scale multiplies the step (a schedule included), a part's own
optimizer trains it, the `.keras` round trip restores every optimizer's
state, and bad input is refused at compile, before any step."""

import numpy as np
import pytest

from grad_reverse._keras import keras
from grad_reverse.adaptation import DANN, DANNLearningRateSchedule, ScaledLearningRate
from helpers.models import dann, domains


def weights(layer) -> list:
    return [w.copy() for w in layer.get_weights()]


def fit(model, **kwargs):
    x_source, y_source, x_target = domains()
    return model.fit(
        x_source, y_source, target=x_target, **{"batch_size": 32, "epochs": 2, "seed": 0, "verbose": 0, **kwargs}
    )


def moved(before, after) -> bool:
    return any(not np.array_equal(a, b) for a, b in zip(before, after))


@pytest.mark.parametrize("optimizer", ["adam", "sgd_momentum"])
def test_a_zero_rate_for_the_feature_extractor_leaves_it_bitwise_unchanged_while_the_heads_move(optimizer):
    model = dann(lambda_max=1.0)
    main = keras.optimizers.Adam(0.02) if optimizer == "adam" else keras.optimizers.SGD(0.1, momentum=0.9)
    model.compile(main, "binary_crossentropy", part_optimizers={"feature_extractor": 0.0})
    model(domains()[0][:1])  # build, to read the starting weights
    features, label, domain = (weights(part) for part in (model.feature_extractor, model.label_head, model.domain_head))
    fit(model)
    for a, b in zip(features, model.feature_extractor.get_weights()):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    assert moved(label, model.label_head.get_weights()) and moved(domain, model.domain_head.get_weights())
    assert int(model.feature_extractor_optimizer.iterations) == int(model.optimizer.iterations) > 0


def one_sgd_step(part_optimizers=None) -> list:
    """The feature extractor's change after one SGD(0.1) step from the same start."""
    model = dann(lambda_max=1.0, lambda_schedule="constant")
    model.compile(keras.optimizers.SGD(0.1), "binary_crossentropy", part_optimizers=part_optimizers)
    model(domains()[0][:1])
    before = weights(model.feature_extractor)
    fit(model, steps_per_epoch=1, epochs=1, shuffle=False)
    return [b - a for a, b in zip(before, model.feature_extractor.get_weights())]


def test_a_scale_multiplies_the_parts_step_and_scale_one_equals_the_models_optimizer():
    reference = one_sgd_step()
    for got, expected in zip(one_sgd_step({"feature_extractor": 1.0}), reference):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=3e-7)  # float32 rounding of w + dw
    for got, expected in zip(one_sgd_step({"feature_extractor": 0.1}), reference):
        np.testing.assert_allclose(got, 0.1 * expected, rtol=1e-4, atol=3e-7)
    assert max(np.abs(d).max() for d in reference) > 1e-4  # the step is not nothing


def test_a_scale_follows_the_models_learning_rate_schedule_step_by_step():
    schedule = DANNLearningRateSchedule(0.05, decay_steps=6)
    model = dann()
    model.compile(keras.optimizers.SGD(schedule), "binary_crossentropy", part_optimizers={"domain_head": 0.1})
    scaled = model.domain_head_optimizer.get_config()["learning_rate"]
    scaled = keras.optimizers.schedules.deserialize(scaled) if isinstance(scaled, dict) else scaled
    assert isinstance(scaled, ScaledLearningRate)
    for step in range(0, 8):
        assert float(scaled(step)) == pytest.approx(0.1 * float(schedule(step)), rel=1e-6)
    fit(model, steps_per_epoch=3)
    assert int(model.domain_head_optimizer.iterations) == int(model.optimizer.iterations) == 6


def test_a_part_may_have_an_optimizer_of_its_own():
    model = dann()
    model.compile(
        keras.optimizers.Adam(0.01),
        "binary_crossentropy",
        part_optimizers={"feature_extractor": keras.optimizers.SGD(0.0), "domain_head": "sgd"},
    )
    assert isinstance(model.domain_head_optimizer, keras.optimizers.SGD)
    model(domains()[0][:1])
    features = weights(model.feature_extractor)
    fit(model)
    for a, b in zip(features, model.feature_extractor.get_weights()):
        np.testing.assert_array_equal(a, b)  # its own SGD(0) trained it, not the model's Adam


def optimizer_state(optimizer) -> list:
    return [np.asarray(v) for v in optimizer.variables]


def test_keras_file_round_trip_restores_every_optimizers_state(tmp_path):
    model = dann(lambda_max=0.5)
    schedule = DANNLearningRateSchedule(0.02, decay_steps=12)
    model.compile(
        keras.optimizers.Adam(schedule),
        "binary_crossentropy",
        part_optimizers={"feature_extractor": 0.1, "domain_head": keras.optimizers.SGD(0.05, momentum=0.9)},
    )
    fit(model)
    path = str(tmp_path / "dann.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, DANN)
    for name in ("optimizer", "feature_extractor_optimizer", "domain_head_optimizer"):
        saved, restored = getattr(model, name), getattr(loaded, name)
        assert type(restored) is type(saved) and int(restored.iterations) == int(saved.iterations) > 0, name
        state, restored_state = optimizer_state(saved), optimizer_state(restored)
        assert len(state) == len(restored_state) > 1, name
        for a, b in zip(state, restored_state):
            np.testing.assert_array_equal(a, b)
    assert float(loaded.feature_extractor_optimizer.learning_rate) == pytest.approx(
        0.1 * float(loaded.optimizer.learning_rate), rel=1e-6
    )
    # Both continue the same way from the restored states.
    fit(model, epochs=1)
    # The loaded model's first fit starts a new ramp on a trained optimizer, and says so.
    with pytest.warns(
        UserWarning, match="starts its lambda ramp and its batches at step 0, but the optimizer has taken"
    ):
        fit(loaded, epochs=1)
    for a, b in zip(model.get_weights(), loaded.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(
    "part_optimizers, error, match",
    [
        ({"encoder": 0.1}, ValueError, r"no part 'encoder'.*\('feature_extractor', 'domain_head'\)"),
        ({"label_head": 0.1}, ValueError, r"no part 'label_head' \(the label head trains with the model's optimizer"),
        ({"feature_extractor": float("nan")}, ValueError, r"learning-rate scale must be a finite number >= 0, got nan"),
        ({"domain_head": float("inf")}, ValueError, r"learning-rate scale must be a finite number >= 0"),
        ({"domain_head": -0.5}, ValueError, r"learning-rate scale must be a finite number >= 0, got -0.5"),
        ({"domain_head": "no such optimizer"}, ValueError, r"must be a Keras optimizer .* or a learning-rate scale"),
        ([("domain_head", 0.1)], TypeError, r"part_optimizers must be a dict"),
    ],
)
def test_bad_part_optimizers_are_refused_at_compile(part_optimizers, error, match):
    model = dann()
    with pytest.raises(error, match=match):
        model.compile("sgd", "binary_crossentropy", part_optimizers=part_optimizers)


def test_part_optimizers_with_mixed_float16_loss_scaling_are_refused_at_compile():
    policy = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = dann()
        optimizer = keras.mixed_precision.LossScaleOptimizer(keras.optimizers.SGD(0.1))
        with pytest.raises(ValueError, match="mixed precision's loss scaling"):
            model.compile(optimizer, "binary_crossentropy", part_optimizers={"feature_extractor": 0.1})
    finally:
        keras.mixed_precision.set_global_policy(policy)
