"""The two networks of the moons demo and how they are scored.

Both have one hidden layer of 15 sigmoid units. The DANN adds a domain head
(one logistic unit, as in the paper's shallow DANN) behind `GradReverse`.
Written against the Keras that `grad_reverse._keras` picks, with APIs that
Keras 2.15 and Keras 3 share.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grad_reverse._keras import keras
from grad_reverse.layer import GradReverse

HIDDEN_UNITS = 15


def _features_and_label(seed: int) -> tuple[Any, Any, Any]:
    # Same seed for both models: they start from the same features and label head.
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((2,), name="x")
    features = keras.layers.Dense(HIDDEN_UNITS, activation="sigmoid", name="features")(inputs)
    label = keras.layers.Dense(1, activation="sigmoid", name="label")(features)
    return inputs, features, label


def build_source_only(seed: int) -> keras.Model:
    """x -> 15 sigmoid units -> P(class 1), initialized from `seed`."""
    inputs, _, label = _features_and_label(seed)
    return keras.Model(inputs, label, name="source_only")


def build_dann(seed: int, lambda_: Any) -> keras.Model:
    """x -> features -> label head, and features -> GradReverse(lambda_) -> domain head.

    Outputs `{"label": P(class 1), "domain": P(target)}`; the features and the
    label head start from the same weights as `build_source_only(seed)`'s.
    """
    inputs, features, label = _features_and_label(seed)
    reversed_features = GradReverse(lambda_=lambda_, name="grad_reverse")(features)
    domain = keras.layers.Dense(1, activation="sigmoid", name="domain")(reversed_features)
    return keras.Model(inputs, {"label": label, "domain": domain}, name="dann")


def predict_label(model: keras.Model, x: np.ndarray) -> np.ndarray:
    """P(class 1) for each point, from either model."""
    # A direct call, not predict(): predict traces a function per model and
    # input shape, and TensorFlow warns about the retracing.
    out = model(x, training=False)
    out = out["label"] if isinstance(out, dict) else out
    return np.asarray(out).reshape(-1)


def accuracy(model: keras.Model, x: np.ndarray, y: np.ndarray) -> float:
    """Fraction of points whose predicted class (P > 0.5) equals `y`."""
    return float(np.mean((predict_label(model, x) > 0.5) == (y > 0.5)))
