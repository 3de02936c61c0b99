"""What the validators read of a model, and the checks of what they are given.

* `model_outputs`: a model's features and class probabilities on held-out
  source points and target points (`Outputs`), the source labels as class
  numbers;
* `label_from_logits`: whether the label head outputs logits, and the
  refusal of a head that is not a classifier's (the rule is in its docstring);
* `as_array_points`, `check_labels`, `check_candidates`: bad input refused
  before any prediction or training step, with what is accepted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from grad_reverse.adaptation.heads import activation_name
from grad_reverse.adaptation.validation import scores

PREDICT_BATCH = 1024

# Compiled losses that say what a linear label head is. Keras names them so in
# `compile(loss=...)`, as a Loss's `name` or as a function's `__name__`.
_REGRESSION_LOSSES = {
    "mse",
    "mae",
    "mape",
    "msle",
    "mean_squared_error",
    "mean_absolute_error",
    "mean_absolute_percentage_error",
    "mean_squared_logarithmic_error",
    "huber",
    "huber_loss",
    "log_cosh",
    "logcosh",
}


def _parts(model: Any) -> tuple:
    """`(feature_extractor or None, the layer whose output is the label)`."""
    features = getattr(model, "feature_extractor", None)
    label_head = getattr(model, "label_head", None)
    if features is not None and label_head is not None:
        return features, label_head
    return None, model


def _loss_name(model: Any) -> str | None:
    """The compiled loss's name, lower case (None: not compiled, or several losses)."""
    loss = getattr(model, "loss", None)
    if loss is None or isinstance(loss, (dict, list, tuple)):
        return None
    if isinstance(loss, str):
        return loss.lower()
    name = getattr(loss, "name", None) or getattr(loss, "__name__", None) or type(loss).__name__
    return str(name).lower()


def loss_kind(model: Any) -> str | None:
    """ "classification", "regression" or None (unknown) from the model's compiled loss."""
    name = _loss_name(model)
    if name is None:
        return None
    if "crossentropy" in name or "hinge" in name:
        return "classification"
    if name in _REGRESSION_LOSSES:
        return "regression"
    return None


def label_from_logits(who: str, model: Any, from_logits: bool | None = None) -> bool:
    """Whether `model`'s label head outputs logits; a ValueError when the model
    is not a classifier the validators can read.

    The rule, in order:

    1. `MDD(form="regression")` is refused: its label output is a regression's.
    2. A model compiled with a regression loss (mse, mae, Huber, log-cosh, ...)
       whose head is linear, or for which `from_logits=True` is passed, is refused.
    3. `from_logits` given: as given.
    4. `CDAN` and classification `MDD`: what their `compile` was told.
    5. A last activation of softmax or sigmoid: probabilities.
    6. A linear last layer: logits when the model was compiled with a
       cross-entropy (or hinge) loss, the classifier's losses; otherwise
       (not compiled, or a loss of its own) it may be a regression, and
       is refused with the advice to pass `from_logits=True`.
    7. Any other activation: refused.
    """
    if getattr(model, "form", None) == "regression":
        raise ValueError(
            f"{who}: the model is an MDD of form 'regression'; the validators score classifiers (class "
            "probabilities from the label head), and a regression's outputs read as logits give meaningless "
            "scores; accepted: classifiers (MDD(form='classification'), DANN, CDAN or a Keras classifier)"
        )
    kind = loss_kind(model)
    _, head = _parts(model)
    activation = activation_name(head)
    regression = ValueError(
        f"{who}: the model is compiled with the regression loss {_loss_name(model)!r}; the validators score "
        "classifiers (class probabilities from the label head); accepted: a classifier whose last activation "
        "is softmax or sigmoid, or a linear head (logits) compiled with a cross-entropy loss"
    )
    if from_logits is not None:
        if from_logits and kind == "regression":
            raise regression
        return bool(from_logits)
    if getattr(model, "_label_from_logits", None) is not None and hasattr(model, "_label_activation"):
        return bool(model._label_from_logits)  # CDAN, MDD: what compile told
    if activation in ("softmax", "sigmoid"):
        return False
    if activation == "linear":
        if kind == "classification":
            return True
        if kind == "regression":
            raise regression
        raise ValueError(
            f"{who}: the label head ends in a linear layer and the model is "
            f"{'not compiled' if _loss_name(model) is None else f'compiled with the loss {_loss_name(model)!r}'}, "
            "so it may be a regression; the validators score classifiers. Accepted: pass from_logits=True if "
            "the head outputs a classifier's logits, or compile the model with a cross-entropy loss"
        )
    raise ValueError(
        f"{who}: the validators need class probabilities from the model's label head, and cannot tell "
        f"whether it outputs logits or probabilities (its last activation is {activation!r}); accepted: "
        "a last activation of softmax, sigmoid (one unit) or linear (logits), or from_logits=True or False"
    )


@dataclasses.dataclass
class Outputs:
    """What the validators read of a model, computed once per model and data
    (by `Validator.__call__`, or once for all of `ValidatorCallback`'s) and
    passed to `Validator.score`. A new validator reads these fields only.

    Attributes:
      source_features: the feature extractor's output on the held-out source
        points, one row per point (for a model without one: its class
        probabilities).
      source_probabilities: the label head's class probabilities on them,
        `[points, classes]` (a sigmoid's one unit made two classes).
      source_labels: their labels as class numbers, `[points]`.
      target_features: the feature extractor's output on the target points.
      target_probabilities: the class probabilities on the target points.
      features_from: "feature_extractor" (a DANN's, CDAN's or MDD's) or
        "probabilities" (a model without one: its class probabilities stand in).
    """

    source_features: np.ndarray
    source_probabilities: np.ndarray
    source_labels: np.ndarray
    target_features: np.ndarray
    target_probabilities: np.ndarray
    features_from: str = "feature_extractor"


def as_array_points(who: str, name: str, x: Any) -> np.ndarray:
    """`x` as a numpy array of points `[points, ...]`: numeric, at least one point,
    every value finite; a ValueError naming what is accepted otherwise (a
    `tf.data.Dataset`, a generator or a `PyDataset` is not: the validators
    read every point, in order, more than once)."""
    if not isinstance(x, (np.ndarray, list, tuple)) and not hasattr(x, "__array__"):
        raise ValueError(
            f"{who}: {name} must be an array of points [points, ...] (a numpy array or a tensor), got a "
            f"{type(x).__module__}.{type(x).__name__}; gather a dataset's points first, e.g. "
            "np.concatenate([np.asarray(batch) for batch in dataset])"
        )
    x = np.asarray(x)
    if x.dtype.kind not in "biuf":
        raise ValueError(f"{who}: {name} must hold numbers (an array [points, ...]), got dtype {x.dtype}")
    if x.ndim < 1 or len(x) == 0:
        raise ValueError(f"{who}: {name} must hold at least one point (an array [points, ...]), got shape {x.shape}")
    if x.dtype.kind == "f" and not np.all(np.isfinite(x)):
        first = int(np.argwhere(~np.isfinite(x.reshape(len(x), -1)))[0, 0])
        raise ValueError(f"{who}: {name} holds NaN or infinity (first at point {first}); accepted: finite values")
    return x


def check_labels(who: str, y: Any, n: int, x_shape: tuple = ()) -> np.ndarray:
    """Labels of `n` held-out points, checked as far as they can be without the
    model: class numbers `[points]` or `[points, 1]` (whole numbers >= 0), or
    one-hot rows `[points, classes]`. The range (below the head's class count)
    is checked by `scores.class_labels` once the model is known."""
    y = as_array_points(who, "y_source", y)
    if len(y) != n:
        raise ValueError(f"{who}: x_source and y_source must hold the same points, got {n} and {len(y)}")
    accepted = "accepted labels: class numbers [points] or [points, 1], or one-hot rows [points, classes]"
    if y.ndim == 1 or (y.ndim == 2 and y.shape[1] == 1):
        if np.any(y < 0) or not np.array_equal(y, np.rint(y)):
            bad = int(np.flatnonzero((y.reshape(-1) < 0) | (y.reshape(-1) != np.rint(y.reshape(-1))))[0])
            raise ValueError(
                f"{who}: y_source must be class numbers 0, 1, ... (got {float(y.reshape(-1)[bad]):g} at point {bad}); "
                + accepted
            )
    elif y.ndim == 2:
        one_hot = np.all((y == 0) | (y == 1), axis=1) & (y.sum(axis=1) == 1)
        if not np.all(one_hot):
            hint = " (it has x_source's shape: were the points passed as labels?)" if y.shape == tuple(x_shape) else ""
            raise ValueError(
                f"{who}: y_source of shape {y.shape} is not one-hot: row {int(np.flatnonzero(~one_hot)[0])} is "
                f"not one 1 among zeros{hint}; " + accepted
            )
    else:
        raise ValueError(f"{who}: y_source has shape {y.shape}; " + accepted)
    return y


def predicted(part: Any, x: np.ndarray) -> np.ndarray:
    """`part`'s outputs on `x` as numpy, `PREDICT_BATCH` points at a time.

    Direct calls, not `predict()`: `predict` traces a function for each new
    model, and a selection or a demo scoring many models makes TensorFlow
    warn about retracing for what is no retracing of any one model."""
    from grad_reverse._keras import keras

    to_numpy = getattr(getattr(keras, "ops", None), "convert_to_numpy", np.asarray)
    x = np.asarray(x)
    parts = [to_numpy(part(x[i : i + PREDICT_BATCH], training=False)) for i in range(0, len(x), PREDICT_BATCH)]
    return np.concatenate([np.asarray(p) for p in parts]) if parts else np.zeros((0,))


def predicted_probabilities(who: str, model: Any, x: np.ndarray, logits: bool) -> np.ndarray:
    """The model's class probabilities [points, classes] on `x`."""
    return scores.probabilities(who, predicted(model, x), logits)


def model_outputs(
    who: str, model: Any, x_source: Any, y_source: Any, x_target: Any, from_logits: bool | None = None
) -> Outputs:
    """The model's features and class probabilities on both domains, and the source's labels as class numbers."""
    x_source, x_target = as_array_points(who, "x_source", x_source), as_array_points(who, "x_target", x_target)
    y_source = check_labels(who, y_source, len(x_source), x_source.shape)
    if x_source.shape[1:] != x_target.shape[1:]:
        raise ValueError(
            f"{who}: x_source and x_target must have points of the same shape, got "
            f"{x_source.shape[1:]} and {x_target.shape[1:]}"
        )
    logits = label_from_logits(who, model, from_logits)
    extractor, head = _parts(model)

    def features_and_probabilities(x: np.ndarray) -> tuple:
        if extractor is None:
            # No feature extractor to read: the class probabilities stand for the features.
            p = predicted_probabilities(who, model, x, logits)
            return p, p
        features = predicted(extractor, x)
        outputs = predicted(head, features)
        return features.reshape(len(x), -1), scores.probabilities(who, outputs, logits)

    source_features, source_p = features_and_probabilities(x_source)
    target_features, target_p = features_and_probabilities(x_target)
    labels = scores.class_labels(who, y_source, source_p.shape[1])
    read = "probabilities" if extractor is None else "feature_extractor"
    return Outputs(source_features, source_p, labels, target_features, target_p, read)


def check_candidates(who: str, candidates: Any, validators: Any = ()) -> None:
    """Refuses candidates the selection cannot compare: not a `{name: trained
    model}` mapping, empty, or, when a validator among `validators` reads
    features (its `reads_features`), models with a feature extractor (DANN,
    CDAN, MDD) beside models without one: a plain Keras model's stand-in
    features are its class probabilities, not the same layer's output, so
    their scores do not compare."""
    if not isinstance(candidates, Mapping):
        raise ValueError(
            f"{who}: candidates must be a dict {{name: trained model}} (the plain network among them), "
            f"got a {type(candidates).__name__}; e.g. {{'plain': plain_model, 'dann@1': dann_model}}"
        )
    if not candidates:
        raise ValueError(
            f"{who}: no candidates; accepted: a dict {{name: trained model}}, the plain network among them"
        )
    for name, model in candidates.items():
        if not callable(getattr(model, "predict", None)):
            raise ValueError(f"{who}: candidate {name!r} is a {type(model).__name__}, not a trained Keras model")
    readers = [v.name for v in validators if getattr(v, "reads_features", False)]
    without = sorted(str(n) for n, m in candidates.items() if _parts(m)[0] is None)
    if readers and without and len(without) < len(candidates):
        raise ValueError(
            f"{who}: {readers} read each candidate's features (its feature extractor's output), and "
            f"{without} have no feature extractor (their class probabilities would stand in, which do not "
            "compare with the others' features); accepted: every candidate a DANN, CDAN or MDD (the plain "
            "network a DANN compiled with domain_loss_weight=0, the same networks), or validators that read "
            "no features"
        )
