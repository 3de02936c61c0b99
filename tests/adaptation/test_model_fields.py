"""What processes compare of the model before a multi-process fit
(`distribution.model_fields`): the constructor's and `compile`'s
configurations, entry by entry, layer names left out. The comparison itself
runs on JAX with two processes (tests/backends/test_distribution_jax.py);
these check what it reads, on any backend, with no process started."""

import numpy as np

from grad_reverse import DANN
from grad_reverse._keras import keras
from grad_reverse.adaptation.training.distribution import model_fields


def dense(inputs: int, units: int):
    return keras.Sequential([keras.Input((inputs,)), keras.layers.Dense(units, activation="sigmoid")])


def model(lambda_max: float = 2.0, rate: float = 0.01) -> DANN:
    dann = DANN(dense(2, 4), dense(4, 1), dense(4, 1), lambda_max=lambda_max)
    dann.compile(keras.optimizers.Adam(rate), "binary_crossentropy")
    return dann


def differing(a: DANN, b: DANN) -> list:
    first, second = model_fields(a), model_fields(b)
    assert list(first) == list(second)
    return [name for name in first if not np.array_equal(first[name], second[name])]


def test_the_same_model_made_twice_agrees_though_keras_numbers_its_layers_anew():
    a, b = model(), model()
    assert a.feature_extractor.name != b.feature_extractor.name  # dense_1 vs dense_3: not compared
    assert differing(a, b) == []


def test_a_constructor_argument_and_a_compile_argument_are_named_where_they_differ():
    assert differing(model(), model(lambda_max=3.0)) == ["the model's lambda_max"]
    assert differing(model(), model(rate=0.02)) == ["compile's optimizer"]
    assert {"the model's feature_extractor", "the model's lambda_max", "compile's loss"} <= set(model_fields(model()))
