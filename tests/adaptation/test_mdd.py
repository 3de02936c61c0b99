"""`grad_reverse.MDD`: the logged transfer term equals a hand computation (numpy,
from the model's weights) on a batch of 2 source + 6 target points, for
softmax, logit and binary (one sigmoid unit) label heads and the regression
form; the trade-off weighs the adversary's step; the adversarial head is a
fresh copy of the label head's architecture; the warm-start schedule; bad
input gets errors naming what is accepted."""

import numpy as np
import pytest

from grad_reverse._keras import keras
from grad_reverse.adaptation import MDD
from helpers.models import points

FEATURES = 3


def parts(units: int, activation: str, seed: int = 0) -> tuple:
    keras.utils.set_random_seed(seed)
    feature_extractor = keras.Sequential([keras.Input((2,)), keras.layers.Dense(FEATURES, activation="tanh")])
    label_head = keras.Sequential(
        [
            keras.Input((FEATURES,)),
            keras.layers.Dense(
                units, activation=activation, kernel_initializer=keras.initializers.RandomNormal(stddev=1.0)
            ),
        ]
    )
    return feature_extractor, label_head


def one_step(model: MDD, label_loss: str, learning_rate: float = 0.0, **compile_kwargs) -> dict:
    x_source, y_source, x_target = points()
    model.compile(keras.optimizers.SGD(learning_rate), label_loss, **compile_kwargs)
    if label_loss == "sparse_categorical_crossentropy":
        y_source = y_source.astype("int32")
    return model.fit(
        x_source,
        y_source,
        target=x_target,
        batch_size=8,
        source_fraction=0.25,
        steps_per_epoch=1,
        shuffle=False,
        verbose=0,
    ).history


def head_outputs(model: MDD) -> tuple:
    """(label head, adversarial head) outputs on the batch's 2 source + 6 target points, float64."""
    x_source, _, x_target = points()
    x = np.concatenate([x_source[:2], x_target[:6]]).astype("float64")
    w, b = (v.astype("float64") for v in model.feature_extractor.get_weights())
    f = np.tanh(x @ w + b)
    outputs = []
    for head in (model.label_head, model.adversarial_head):
        wh, bh = (v.astype("float64") for v in head.get_weights())
        outputs.append(f @ wh + bh)  # pre-activation
    return tuple(outputs)


def probabilities(z: np.ndarray) -> np.ndarray:
    if z.shape[1] == 1:
        p = 1 / (1 + np.exp(-z))
        return np.concatenate([1 - p, p], axis=1)
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def hand_transfer(model: MDD, margin: float) -> float:
    z, z_adv = head_outputs(model)
    prediction = probabilities(z).argmax(1)
    p_adv = probabilities(z_adv)[np.arange(8), prediction]
    source = -np.log(p_adv[:2])
    target = np.log(np.minimum(1 - p_adv[2:] + 1e-6, 1.0))
    return float(margin * source.mean() - target.mean())


@pytest.mark.parametrize(
    "units, activation, loss",
    [
        (3, "softmax", "sparse_categorical_crossentropy"),
        (3, "linear", "sparse_categorical_crossentropy"),
        (1, "sigmoid", "binary_crossentropy"),
    ],
)
def test_the_transfer_term_equals_a_hand_computation(units, activation, loss):
    model = MDD(*parts(units, activation), margin=3.0)
    compile_kwargs = {"label_from_logits": True} if activation == "linear" else {}
    history = one_step(model, loss, **compile_kwargs)
    assert history["transfer_loss"][0] == pytest.approx(hand_transfer(model, 3.0), rel=1e-5)
    # The margin matters on this batch: the check tells margins apart.
    assert abs(hand_transfer(model, 3.0) - hand_transfer(model, 1.0)) > 0.1


def test_the_default_margin_is_4_and_the_regression_form_is_the_mean_absolute_disparity():
    model = MDD(*parts(3, "softmax"))
    assert (model.margin, model.trade_off, model.lambda_max, model.gamma, model.lambda_schedule) == (
        4.0,
        1.0,
        0.1,
        20.0,
        "paper",
    )
    regression = MDD(*parts(2, "linear"), form="regression", margin=2.0)
    history = one_step(regression, "mse")
    z, z_adv = head_outputs(regression)
    per_point = np.abs(z_adv - z).mean(1)
    assert history["transfer_loss"][0] == pytest.approx(2.0 * per_point[:2].mean() - per_point[2:].mean(), rel=1e-5)


def test_the_adversarial_head_is_a_fresh_copy_of_the_label_heads_architecture():
    model = MDD(*parts(3, "softmax"))
    assert model.adversarial_head is not model.label_head
    assert [w.shape for w in model.adversarial_head.get_weights()] == [w.shape for w in model.label_head.get_weights()]
    assert not np.array_equal(model.adversarial_head.get_weights()[0], model.label_head.get_weights()[0])


def test_the_trade_off_weighs_the_adversarys_step():
    """The adversarial head learns from the transfer term alone: with SGD its step at
    trade_off 2 is twice its step at trade_off 1."""
    steps = []
    for trade_off in (1.0, 2.0):
        model = MDD(*parts(3, "softmax"), trade_off=trade_off, lambda_schedule="constant", lambda_max=0.5)
        before = model.adversarial_head.get_weights()[0]
        one_step(model, "sparse_categorical_crossentropy", learning_rate=0.1)
        steps.append(model.adversarial_head.get_weights()[0] - before)
    assert np.abs(steps[0]).max() > 1e-4
    np.testing.assert_allclose(steps[1], 2 * steps[0], rtol=1e-4, atol=1e-7)


def test_the_feature_extractor_learns_the_transfer_term_through_the_reversal():
    """The feature extractor's step moves with lambda, linearly (SGD, one step): its
    difference from the lambda-0 step doubles when lambda does, and is not zero."""

    def feature_step(lambda_max: float) -> np.ndarray:
        model = MDD(*parts(3, "softmax"), lambda_schedule="constant", lambda_max=lambda_max)
        before = model.feature_extractor.get_weights()[0]
        one_step(model, "sparse_categorical_crossentropy", learning_rate=0.1)
        return model.feature_extractor.get_weights()[0] - before

    base = feature_step(0.0)
    once, twice = feature_step(0.5) - base, feature_step(1.0) - base
    assert np.abs(once).max() > 1e-5
    np.testing.assert_allclose(twice, 2 * once, rtol=1e-3, atol=1e-7)


def test_the_default_schedule_is_tllibs_warm_start_curve_over_the_fit():
    """TLlib's warm start over its 20,000-step training, 0.1 (2 / (1 + exp(-i / 1000)) - 1),
    is 0.1 (2 / (1 + exp(-20 p)) - 1) at progress p = i / 20000: here over the fit's progress."""
    model = MDD(*parts(3, "softmax"))
    x_source, y_source, x_target = points()
    model.compile("sgd", "sparse_categorical_crossentropy")
    history = model.fit(
        x_source, y_source.astype("int32"), target=x_target, batch_size=8, epochs=3, steps_per_epoch=2, verbose=0
    ).history
    expected = [0.1 * (2 / (1 + np.exp(-20 * s / 5)) - 1) for s in (1, 3, 5)]  # the last step of each epoch
    np.testing.assert_allclose(history["lambda"], expected, rtol=1e-5)


def test_the_warm_start_schedule_is_tllibs():
    model = MDD(*parts(3, "softmax"), lambda_schedule="warm_start", gamma=1.0, warm_start_steps=4)
    x_source, y_source, x_target = points()
    model.compile("sgd", "sparse_categorical_crossentropy")
    history = model.fit(
        x_source, y_source.astype("int32"), target=x_target, batch_size=8, epochs=3, steps_per_epoch=2, verbose=0
    ).history
    # The last step of each epoch (steps 1, 3, 5), not clipped at warm_start_steps.
    expected = [0.1 * (2 / (1 + np.exp(-s / 4)) - 1) for s in (1, 3, 5)]
    np.testing.assert_allclose(history["lambda"], expected, rtol=1e-5)


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("margin", [0.0, -1.0])
def test_a_margin_not_above_zero_is_refused(margin):
    with pytest.raises(ValueError, match=r"margin .* must be > 0"):
        MDD(*parts(3, "softmax"), margin=margin)


def test_an_adversarial_head_of_another_shape_is_refused():
    feature_extractor, label_head = parts(3, "softmax")
    adversary = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(2, activation="softmax")])
    model = MDD(feature_extractor, label_head, adversarial_head=adversary)
    model.compile("sgd", "sparse_categorical_crossentropy")
    x_source, y_source, x_target = points()
    with pytest.raises(ValueError, match=r"adversarial head must give the label head's output shape"):
        model.fit(x_source, y_source.astype("int32"), target=x_target, batch_size=8, verbose=0)


@pytest.mark.parametrize("activation", ["linear", "sigmoid"])
def test_an_adversarial_head_with_another_last_activation_is_refused_at_construction(activation):
    """Its output would be decoded with the label head's activation (softmax here): misread silently."""
    feature_extractor, label_head = parts(3, "softmax")
    adversary = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(3, activation=activation)])
    with pytest.raises(
        ValueError, match=rf"adversarial head's last activation is '{activation}' but the label.*'softmax'"
    ):
        MDD(feature_extractor, label_head, adversarial_head=adversary)
    MDD(feature_extractor, label_head, adversarial_head=adversary, form="regression")  # outputs compared as values


def test_a_label_head_without_class_probabilities_is_refused_at_compile():
    feature_extractor, _ = parts(3, "softmax")
    label_head = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(3, activation="relu")])
    with pytest.raises(ValueError, match=r"MDD.compile: .*class probabilities.*'relu'"):
        MDD(feature_extractor, label_head).compile("sgd", "mse")


class NoLearningRateSGD(keras.optimizers.SGD):
    """An optimizer whose config has no learning_rate: no scaled copy can be made of it."""

    def get_config(self):
        return {k: v for k, v in super().get_config().items() if k != "learning_rate"}


@pytest.mark.parametrize(
    "optimizer, part_optimizers, match",
    [
        (
            "sgd",
            {"adversarial_head": -0.5},
            r"^MDD\.compile: part_optimizers\['adversarial_head'\]: a learning-rate scale",
        ),
        (NoLearningRateSGD(0.1), {"feature_extractor": 0.1}, r"^MDD\.compile: a learning-rate scale needs"),
    ],
    ids=["negative-scale", "no-learning-rate"],
)
def test_bad_part_optimizer_scales_are_refused_naming_mdd(optimizer, part_optimizers, match):
    with pytest.raises(ValueError, match=match):
        MDD(*parts(3, "softmax")).compile(optimizer, "sparse_categorical_crossentropy", part_optimizers=part_optimizers)
