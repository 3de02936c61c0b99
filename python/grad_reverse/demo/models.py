"""The two networks of the moons demo and how they are scored.

Both have one hidden layer of 15 sigmoid units. The DANN is
`grad_reverse.DANN` of that layer (the feature extractor), the same label
head, and a domain head of one logistic unit, as in the paper's shallow DANN.
Written against the Keras that `grad_reverse._keras` picks, with APIs that
Keras 2.15 and Keras 3 share.
"""

from __future__ import annotations

import numpy as np

from grad_reverse._keras import keras
from grad_reverse.adaptation import DANN

HIDDEN_UNITS = 15


def _features(seed: int) -> tuple:
    # Same seed for both models: they start from the same features and label
    # head (the weights are drawn in the same order: features, label, domain).
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((2,), name="x")
    return inputs, keras.layers.Dense(HIDDEN_UNITS, activation="sigmoid", name="features")(inputs)


def _label(features):
    return keras.layers.Dense(1, activation="sigmoid", name="label")(features)


def build_plain(seed: int) -> keras.Model:
    """x -> 15 sigmoid units -> P(class 1), initialized from `seed`."""
    inputs, features = _features(seed)
    return keras.Model(inputs, _label(features), name="plain")


def build_dann(seed: int, lambda_max: float, gamma: float) -> DANN:
    """`DANN`: x -> features -> P(class 1); features -> GradReverse -> P(target domain).

    The features and the label head start from the same weights as
    `build_plain(seed)`'s; lambda follows the paper's ramp up to `lambda_max`.
    """
    inputs, features = _features(seed)
    feature_extractor = keras.Model(inputs, features, name="feature_extractor")
    label_inputs = keras.Input((HIDDEN_UNITS,), name="label_features")
    label_head = keras.Model(label_inputs, _label(label_inputs), name="label_head")
    domain_inputs = keras.Input((HIDDEN_UNITS,), name="domain_features")
    domain = keras.layers.Dense(1, activation="sigmoid", name="domain")(domain_inputs)
    domain_head = keras.Model(domain_inputs, domain, name="domain_head")
    return DANN(feature_extractor, label_head, domain_head, lambda_max=lambda_max, gamma=gamma, name="dann")


def predict_label(model: keras.Model, x: np.ndarray) -> np.ndarray:
    """P(class 1) for each point, from either model."""
    # A direct call, not predict(): predict traces a function per model and
    # input shape, and TensorFlow warns about the retracing.
    return np.asarray(model(x, training=False)).reshape(-1)


def class_scores(model: keras.Model, x: np.ndarray) -> np.ndarray:
    """`[points, classes]` probabilities: one sigmoid unit's P becomes (1 - P, P)."""
    scores = np.asarray(model(x, training=False)).reshape(len(x), -1)  # a direct call: see predict_label
    return np.concatenate([1.0 - scores, scores], axis=1) if scores.shape[1] == 1 else scores


def predicted_class(model: keras.Model, x: np.ndarray) -> np.ndarray:
    """The class each point is given: P > 0.5 for one sigmoid unit (the moons'
    heads), the largest probability for a softmax head (`demo.method_runs`' blobs)."""
    return class_scores(model, x).argmax(1)  # (1 - P, P): class 1 exactly when P > 0.5


def accuracy(model: keras.Model, x: np.ndarray, y: np.ndarray) -> float:
    """Fraction of points whose predicted class (P > 0.5) equals `y`."""
    return float(np.mean((predict_label(model, x) > 0.5) == (y > 0.5)))
