"""Validators: scoring a trained model for a target domain whose labels are unknown.

Each validator takes a trained model, held-out labeled source points and
unlabeled target points, and returns one number where **higher is better**,
so that Keras' `ModelCheckpoint(monitor=..., mode="max")`, `EarlyStopping`
and KerasTuner's `Objective(..., "max")` can use it as they are
(`ValidatorCallback` writes the scores into the epoch's logs).

    score = SoftNeighborhoodDensity()(model, x_source_val, y_source_val, x_target)

The model may be a `DANN`, `CDAN` or `MDD` (features: its feature
extractor's output) or any Keras classifier (features: its class probabilities). Its
label head must end in a softmax, one sigmoid unit, or a linear layer
(logits): the validators work on class probabilities. The arithmetic is
numpy on the model's `predict` outputs (`validation.scores`), so it runs on
every Keras backend.

Which validator to trust is a measured question, not a theoretical one:
docs/results/validators.md has the study on this project's shifts, and
`DEFAULT_VALIDATOR` is the one it picked.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from grad_reverse.adaptation.validation import scores
from grad_reverse.adaptation.heads import activation_name

PREDICT_BATCH = 1024


def _parts(model: Any) -> tuple:
    """`(feature_extractor or None, the layer whose output is the label)`."""
    features = getattr(model, "feature_extractor", None)
    label_head = getattr(model, "label_head", None)
    if features is not None and label_head is not None:
        return features, label_head
    return None, model


def label_from_logits(who: str, model: Any, from_logits: bool | None = None) -> bool:
    """Whether `model`'s label head outputs logits, told from its last activation
    unless `from_logits` says it; a ValueError naming what is accepted otherwise."""
    if from_logits is not None:
        return bool(from_logits)
    if getattr(model, "_label_from_logits", None) is not None and hasattr(model, "_label_activation"):
        return bool(model._label_from_logits)  # CDAN, MDD: what compile told
    _, head = _parts(model)
    activation = activation_name(head)
    if activation in ("softmax", "sigmoid"):
        return False
    if activation == "linear":
        return True
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
    """

    source_features: np.ndarray
    source_probabilities: np.ndarray
    source_labels: np.ndarray
    target_features: np.ndarray
    target_probabilities: np.ndarray


def _as_points(who: str, name: str, x: Any) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim < 1 or len(x) == 0:
        raise ValueError(f"{who}: {name} must hold at least one point (an array [points, ...]), got shape {x.shape}")
    return x


def model_outputs(
    who: str, model: Any, x_source: Any, y_source: Any, x_target: Any, from_logits: bool | None = None
) -> Outputs:
    """The model's features and class probabilities on both domains, and the source's labels as class numbers."""
    x_source, x_target = _as_points(who, "x_source", x_source), _as_points(who, "x_target", x_target)
    y_source = _as_points(who, "y_source", y_source)
    if len(y_source) != len(x_source):
        raise ValueError(
            f"{who}: x_source and y_source must hold the same points, got {len(x_source)} and {len(y_source)}"
        )
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
            p = scores.probabilities(who, np.asarray(model.predict(x, batch_size=PREDICT_BATCH, verbose=0)), logits)
            return p, p
        features = np.asarray(extractor.predict(x, batch_size=PREDICT_BATCH, verbose=0))
        outputs = np.asarray(head.predict(features, batch_size=PREDICT_BATCH, verbose=0))
        return features.reshape(len(x), -1), scores.probabilities(who, outputs, logits)

    source_features, source_p = features_and_probabilities(x_source)
    target_features, target_p = features_and_probabilities(x_target)
    labels = scores.class_labels(who, y_source, source_p.shape[1])
    return Outputs(source_features, source_p, labels, target_features, target_p)


class Validator:
    """Scores a trained model without target labels; higher is better.

    A validator is called on a model and data, and returns a float:

        score = validator(model, x_source, y_source, x_target, from_logits=None)

    Subclasses set `name`, `min_source` and `min_target`, and define
    `score(outputs)`; `__call__` computes the `Outputs` and checks the sizes.

    Attributes:
      name: the validator's key in `VALIDATORS`, and what `ValidatorCallback`
        logs its score as (`val_<name>`).
      min_source: the fewest held-out source points it accepts.
      min_target: the fewest target points it accepts.
    """

    name = "validator"
    min_source = 1
    min_target = 1

    def check_sizes(self, n_source: int, n_target: int) -> None:
        """A ValueError when there are too few points for this validator.

        Args:
          n_source: the number of held-out source points.
          n_target: the number of target points.
        """
        if n_source < self.min_source or n_target < self.min_target:
            raise ValueError(
                f"{type(self).__name__}: needs at least {self.min_source} held-out source points and "
                f"{self.min_target} target points, got {n_source} and {n_target}"
            )

    def score(self, outputs: Outputs) -> float:
        """The score of what the validator read of a model; higher is better.

        Args:
          outputs: the model's features and class probabilities on both
            domains and the source's labels.

        Returns:
          The score, a float.
        """
        raise NotImplementedError

    def __call__(
        self, model: Any, x_source: Any, y_source: Any, x_target: Any, *, from_logits: bool | None = None
    ) -> float:
        """The model's score (higher is better) from held-out labeled source points and unlabeled target points.

        Args:
          model: a trained `DANN`, `CDAN` or `MDD` (features: its feature
            extractor's output), or any Keras classifier (features: its
            class probabilities).
          x_source: held-out source points, `[points, ...]` (not trained on).
          y_source: their labels: class numbers, one-hot rows, or 0/1 for a
            sigmoid's one unit.
          x_target: unlabeled target points (those trained on may be used: no
            target label is read).
          from_logits: whether the label head outputs logits; default: told
            from its last activation (softmax, sigmoid: probabilities;
            linear: logits), or from what `compile(label_from_logits=...)` told CDAN and MDD.

        Returns:
          The score, a float; higher is better.

        Raises:
          ValueError: too few points for this validator (`min_source`,
            `min_target`), points of different shapes, labels that do not
            match the points, or a label head whose outputs cannot be told.
        """
        self.check_sizes(len(x_source), len(x_target))
        return self.score(model_outputs(type(self).__name__, model, x_source, y_source, x_target, from_logits))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class SourceAccuracy(Validator):
    """Accuracy on held-out source points: the baseline. It estimates the target
    accuracy only as far as the domains agree, and ignores the target entirely
    (so it cannot see what adaptation gains, only what it costs on the source).
    Cost: one prediction over the source points."""

    name = "source_accuracy"

    def score(self, outputs: Outputs) -> float:
        return scores.accuracy(outputs.source_probabilities, outputs.source_labels)


class PredictionEntropy(Validator):
    """Minus the mean entropy (nats) of the target predictions: confident
    predictions on the target score high (0 is the most). Blind to a model
    that is confidently wrong, or that sends every target point to one class.
    Cost: one prediction over the target points."""

    name = "entropy"

    def score(self, outputs: Outputs) -> float:
        return scores.prediction_entropy(outputs.target_probabilities)


class InformationMaximization(Validator):
    """Information maximisation on the target: the entropy of the mean
    prediction (the classes used evenly) minus the mean entropy (each
    prediction confident), in nats. Unlike `PredictionEntropy` it penalises
    collapsing the target onto one class; it assumes the target's classes are
    roughly balanced. Cost: one prediction over the target points."""

    name = "im"

    def score(self, outputs: Outputs) -> float:
        return scores.information_maximization(outputs.target_probabilities)


class SoftNeighborhoodDensity(Validator):
    """SND (Saito et al., ICCV 2021): the mean entropy of each target point's
    softmax (at `temperature`) over its cosine similarities to the other target
    points. High when target points have many close neighbours in the space
    the label head makes: clusters that are neither collapsed nor scattered.

    Args:
      temperature: the softmax temperature (0.05, the paper's).
      on: "probabilities" (the paper's choice, and pytorch-adapt's default)
        or "features" (the feature extractor's output).
      max_points: at most this many target points are used (a seeded
        sample), since the cost is quadratic: n^2 similarities.
      seed: the sample's seed.
    """

    name = "snd"
    min_target = 2

    def __init__(self, temperature: float = 0.05, on: str = "probabilities", max_points: int = 4096, seed: int = 0):
        if not float(temperature) > 0.0:
            raise ValueError(f"SoftNeighborhoodDensity: temperature must be > 0, got {temperature!r}")
        if on not in ("probabilities", "features"):
            raise ValueError(f"SoftNeighborhoodDensity: on must be 'probabilities' or 'features', got {on!r}")
        self.temperature, self.on, self.max_points, self.seed = float(temperature), on, int(max_points), seed

    def score(self, outputs: Outputs) -> float:
        points = outputs.target_probabilities if self.on == "probabilities" else outputs.target_features
        if len(points) > self.max_points:
            keep = np.random.default_rng(self.seed).choice(len(points), self.max_points, replace=False)
            points = points[np.sort(keep)]
        return scores.soft_neighborhood_density(points, self.temperature)

    def __repr__(self) -> str:
        return f"SoftNeighborhoodDensity(temperature={self.temperature:g}, on={self.on!r})"


class DeepEmbeddedValidation(Validator):
    """DEV (You et al., ICML 2019), negated so that higher is better: the source
    validation loss importance-weighted toward the target, with the weights
    as a control variate to cut its variance.

    The held-out source points are split (`holdout` of them, seeded): a
    logistic domain classifier learns source against target on the rest's
    features, its density ratios weight the held-out part's cross-entropy.
    It estimates the target's cross-entropy risk, unbiased when the features'
    density ratio is right and the label given the features is shared by the
    domains. Cost: one prediction per domain and a logistic regression on
    the features (Newton's method, features^2 per point).

    Args:
      holdout: the share of the held-out source points that are weighted
        (the rest trains the domain classifier); at least 3 points each.
      seed: the split's seed.
    """

    name = "dev"
    min_source = 6
    min_target = 2

    def __init__(self, holdout: float = 0.33, seed: int = 0):
        if not 0.0 < float(holdout) < 1.0:
            raise ValueError(f"DeepEmbeddedValidation: holdout must be between 0 and 1, got {holdout!r}")
        self.holdout, self.seed = float(holdout), seed

    def split(self, n: int) -> tuple:
        """`(train, validation)` indices of the `n` held-out source points.

        Args:
          n: the number of held-out source points.
        """
        order = np.random.default_rng(self.seed).permutation(n)
        validation = min(max(int(np.ceil(n * self.holdout)), 3), n - 3)
        return np.sort(order[validation:]), np.sort(order[:validation])

    def score(self, outputs: Outputs) -> float:
        train, validation = self.split(len(outputs.source_labels))
        weights = scores.importance_weights(
            outputs.source_features[train], outputs.target_features, outputs.source_features[validation]
        )
        losses = scores.cross_entropy(outputs.source_probabilities[validation], outputs.source_labels[validation])
        return -scores.deep_embedded_risk(weights, losses)


class SourceAccuracyAndAlignment(Validator):
    """Ben-David et al.'s bound on the target error, as a score: the held-out
    source accuracy minus how well a linear classifier tells the domains apart
    on the features, `source_accuracy - (1 - 2 * domain_error)` (the proxy
    A-distance halved). High when the source is classified well and the
    features do not give away the domain. Blind to what the bound's third
    term holds: a label shift, where aligning the domains' features as a
    whole moves target points into the wrong classes. Cost: one prediction
    per domain and a logistic regression on half of each domain's features.

    Args:
      seed: the seed of the halves the domain classifier trains and is
        tested on.

    Attributes:
      seed: the seed it was made with.
    """

    name = "source_and_alignment"
    min_source = 4
    min_target = 4

    def __init__(self, seed: int = 0):
        self.seed = seed

    def score(self, outputs: Outputs) -> float:
        accuracy = scores.accuracy(outputs.source_probabilities, outputs.source_labels)
        error = scores.domain_error(outputs.source_features, outputs.target_features, self.seed)
        return accuracy - (1.0 - 2.0 * error)


# Chosen from the study (docs/results/validators.md), not from the papers: among
# the candidates' last checkpoints it was never more than 1 point below the plain
# network on any shift (mean over seeds), and its choice on label-shifted blobs
# was never DANN on both CPU paths tried (`source_and_alignment`, the other
# validator within 1 point everywhere, chose DANN there on some seeds). It
# cannot see a label shift or what adapting gains on the target; it sees what
# adapting costs on the source.
DEFAULT_VALIDATOR = "source_accuracy"

VALIDATORS = {
    cls.name: cls
    for cls in (
        SourceAccuracy,
        PredictionEntropy,
        InformationMaximization,
        SoftNeighborhoodDensity,
        DeepEmbeddedValidation,
        SourceAccuracyAndAlignment,
    )
}


def validator(name_or_validator: Any) -> Validator:
    """A validator from its name (`VALIDATORS`' keys) or itself."""
    if isinstance(name_or_validator, Validator):
        return name_or_validator
    if isinstance(name_or_validator, str) and name_or_validator in VALIDATORS:
        return VALIDATORS[name_or_validator]()
    raise ValueError(f"unknown validator {name_or_validator!r}; accepted: a Validator, or one of {sorted(VALIDATORS)}")


def score_all(
    who: str, validators: list, model: Any, x_source: Any, y_source: Any, x_target: Any, from_logits: bool | None
) -> dict:
    """`{validator name: score}` of `model`, its outputs computed once for the validators that only read them."""
    for v in validators:
        v.check_sizes(len(x_source), len(x_target))
    outputs = None
    result = {}
    for v in validators:
        if type(v).__call__ is Validator.__call__:
            if outputs is None:
                outputs = model_outputs(who, model, x_source, y_source, x_target, from_logits)
            result[v.name] = v.score(outputs)
        else:  # a validator that does more than read outputs (reverse validation trains)
            result[v.name] = v(model, x_source, y_source, x_target, from_logits=from_logits)
    return result
