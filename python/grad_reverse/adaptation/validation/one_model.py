"""The validators that score one trained model: each reads what
`outputs.model_outputs` computed of the model on held-out source points and
target points (`Outputs`) and returns one number, higher being better. The
names users pass for them, and the default, are `validators`'; how
`ValidatorCallback` and `select_without_labels` score many at once is
`scoring`'s."""

from __future__ import annotations

from typing import Any

import numpy as np

from grad_reverse.adaptation.validation import scores
from grad_reverse.adaptation.validation.base import Validator
from grad_reverse.adaptation.validation.outputs import (
    Outputs,
    as_array_points,
    label_from_logits,
    predicted_probabilities,
)


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

    @property
    def reads_features(self) -> bool:
        return self.on == "features"

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
    reads_features = True

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

    Range: [-1, 1]. The domain error is measured on held-out halves, where a
    classifier that cannot tell the domains apart errs about half the time,
    sometimes more (sampling); an error above 0.5 says no more than 0.5 does
    (the features do not give the domain away), so it is taken as 0.5, and
    the alignment term stays in [0, 1].

    Args:
      seed: the seed of the domain classifier's split of each domain's points.
    """

    name = "source_and_alignment"
    min_source = 4
    min_target = 4
    reads_features = True

    def __init__(self, seed: int = 0):
        self.seed = seed

    def score(self, outputs: Outputs) -> float:
        accuracy = scores.accuracy(outputs.source_probabilities, outputs.source_labels)
        error = min(scores.domain_error(outputs.source_features, outputs.target_features, self.seed), 0.5)
        return accuracy - (1.0 - 2.0 * error)


class BatchNuclearNorm(Validator):
    """BNM (Cui et al., CVPR 2020) as pytorch-adapt's `BNMValidator` scores it:
    the nuclear norm (sum of singular values) of the target probabilities
    [points, classes], divided by the points. High when the predictions are
    confident (each row near one-hot) and spread over many classes (the
    rows' classes independent); at most min(points, classes) / points.
    Cost: one prediction over the target points and an SVD of [points, classes]."""

    name = "bnm"

    def score(self, outputs: Outputs) -> float:
        return scores.batch_nuclear_norm(outputs.target_probabilities)


class MixVal(Validator):
    """MixVal (Hu et al., NeurIPS 2023): mixed target points as probes. Each
    target point is mixed with a partner, `ratio * x + (1 - ratio) *
    x[permutation]`, the permutation drawn from `seed`; a mixture's expected
    class is the model's own prediction for the point it holds more of.
    The score (`scores.mixed_sample_consistency`) is the mean of the shares
    of mixtures predicted so, among partners of the same predicted class
    (intra-cluster) and of different ones (inter-cluster): high when the
    model's target classes are clusters with margins between them.

    The permutation is `numpy.random.RandomState(seed).permutation(n)`, the
    one skada's `MixValScorer(random_state=seed)` draws, so both mix the
    same pairs. Integer inputs (e.g. uint8 images) are mixed as float32.
    Cost: two predictions over the target points.

    Args:
      ratio: the mixing ratio, in (0, 1) (0.55: the authors' and skada's).
      seed: the permutation's seed (a whole number).
    """

    name = "mixval"
    min_target = 2

    def __init__(self, ratio: float = 0.55, seed: int = 0):
        if not 0.0 < float(ratio) < 1.0:
            raise ValueError(f"MixVal: ratio must be between 0 and 1 (exclusive), got {ratio!r}")
        self.ratio, self.seed = float(ratio), int(seed)

    def permutation(self, n: int) -> np.ndarray:
        """Each of the `n` target points' partner.

        Args:
          n: the number of target points.
        """
        return np.random.RandomState(self.seed).permutation(n)

    def mixtures(self, x: np.ndarray) -> tuple:
        """`(mixtures, permutation)` of the target points `x`.

        Args:
          x: the target points, `[points, ...]`.
        """
        x = np.asarray(x)
        x = x if x.dtype.kind == "f" else x.astype(np.float32)
        permutation = self.permutation(len(x))
        return (self.ratio * x + (1.0 - self.ratio) * x[permutation]).astype(x.dtype), permutation

    def score(self, outputs: Outputs) -> float:
        raise ValueError("MixVal: predicts its mixtures with the model: call it on a model, not on outputs")

    def score_model(self, outputs: Outputs, model: Any, x_target: Any, from_logits: bool | None) -> float:
        mixed, permutation = self.mixtures(as_array_points("MixVal", "x_target", x_target))
        mixed_p = predicted_probabilities("MixVal", model, mixed, label_from_logits("MixVal", model, from_logits))
        return scores.mixed_sample_consistency(outputs.target_probabilities, mixed_p, permutation, self.ratio)

    def __repr__(self) -> str:
        return f"MixVal(ratio={self.ratio:g}, seed={self.seed})"
