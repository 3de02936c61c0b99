"""The rules the manuals state about user input, enforced with errors that say
what was wrong and what is accepted: no `GradReverse` inside the part the
model puts behind its own reversal, numbers that are numbers, the layer's
`lambda_` keyword, a lambda variable of any real dtype (documented: cast)."""

from __future__ import annotations

import numpy as np
import pytest

import grad_reverse
from grad_reverse._keras import keras
from grad_reverse.adaptation import CDAN, DANN, MDD
from helpers.backends import needs_tensorflow
from helpers.models import dann, domains, parts


def head_with_a_reversal(nested: bool = False):
    reversal = grad_reverse.GradReverse(name="my_reversal")
    inner = keras.Sequential([reversal]) if nested else reversal
    return keras.Sequential([keras.Input((8,)), inner, keras.layers.Dense(1, activation="sigmoid")])


@pytest.mark.parametrize("nested", [False, True], ids=["direct", "inside-a-nested-model"])
def test_a_domain_head_holding_a_gradreverse_is_refused(nested):
    feature_extractor, label_head, _ = parts()
    with pytest.raises(ValueError, match="DANN: the domain head must not contain a GradReverse layer .*'my_reversal'"):
        DANN(feature_extractor, label_head, head_with_a_reversal(nested))


def test_cdans_domain_head_and_mdds_adversarial_head_holding_a_gradreverse_are_refused():
    feature_extractor, _, _ = parts()
    label_head = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2, activation="softmax")])
    with pytest.raises(ValueError, match="CDAN: the domain head must not contain a GradReverse"):
        CDAN(feature_extractor, label_head, head_with_a_reversal())
    adversary = keras.Sequential(
        [keras.Input((8,)), grad_reverse.GradReverse(), keras.layers.Dense(2, activation="softmax")]
    )
    with pytest.raises(ValueError, match="MDD: the adversarial head must not contain a GradReverse"):
        MDD(feature_extractor, label_head, adversary)


@pytest.mark.parametrize(
    "argument, value",
    [("lambda_max", "6"), ("gamma", True), ("lambda_max", None), ("gamma", [10.0])],
)
def test_a_models_number_argument_of_another_type_is_refused(argument, value):
    with pytest.raises(TypeError, match=rf"DANN: {argument} must be a real number \(an int or a float\), got"):
        dann(**{argument: value})


def test_numpy_numbers_are_numbers():
    model = dann(lambda_max=np.float32(2.0), gamma=10)
    assert model.lambda_max == 2.0 and model.gamma == 10.0


def test_mdd_and_the_schedule_arguments_of_another_type_are_refused():
    feature_extractor, _, _ = parts()
    label_head = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2, activation="softmax")])
    with pytest.raises(TypeError, match="MDD: margin must be a real number"):
        MDD(feature_extractor, label_head, margin="4")
    with pytest.raises(TypeError, match="DANN: warm_start_steps must be an integer >= 1, got str '20'"):
        dann(lambda_schedule="warm_start", warm_start_steps="20")


def test_compile_and_fit_numbers_of_another_type_are_refused():
    x_source, y_source, x_target = domains()
    model = dann()
    with pytest.raises(TypeError, match="DANN: domain_loss_weight must be a real number"):
        model.compile("adam", "binary_crossentropy", domain_loss_weight="1")
    model.compile("adam", "binary_crossentropy")
    with pytest.raises(TypeError, match="DANN.fit: epochs must be an integer >= 1, got str '3'"):
        model.fit(x_source, y_source, target=x_target, epochs="3", verbose=0)
    with pytest.raises(TypeError, match="DANN.fit: steps_per_epoch must be an integer >= 1, got str '5'"):
        model.fit(x_source, y_source, target=x_target, steps_per_epoch="5", verbose=0)
    with pytest.raises(ValueError, match="DANN.fit: initial_epoch must be an integer >= 0, got -1"):
        model.fit(x_source, y_source, target=x_target, initial_epoch=-1, verbose=0)


def test_the_layer_given_lambda_without_the_underscore_names_lambda_():
    with pytest.raises(TypeError, match=r"the argument is lambda_ .* got lambda=1.0; pass GradReverse\(lambda_=...\)"):
        grad_reverse.GradReverse(**{"lambda": 1.0})


@needs_tensorflow
def test_an_int32_variable_lambda_is_cast_and_read_at_every_call():
    """README: an integer variable is cast to float32 at each call, so assigning it takes effect."""
    import tensorflow as tf

    lambda_ = tf.Variable(2, dtype=tf.int32)
    layer = grad_reverse.GradReverse(lambda_=lambda_)
    x = tf.ones([3])

    @tf.function
    def gradient():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
        return tape.gradient(y, x)

    assert gradient().numpy().tolist() == [-2.0] * 3
    lambda_.assign(3)
    assert gradient().numpy().tolist() == [-3.0] * 3
