"""The validators' arithmetic on arrays (numpy only, no Keras, no TensorFlow):
class probabilities from a label head's outputs, and each score from
probabilities, features and labels. `validators` applies them to a model.

Every function here returns a number where higher is better, except
`deep_embedded_risk`, a risk (lower is better) that `DeepEmbeddedValidation`
negates.
"""

from __future__ import annotations

import numpy as np

# Probabilities are clipped to this before a log (a softmax may give exact 0).
TINY = 1e-15


def _fail(who: str, message: str) -> ValueError:
    return ValueError(f"{who}: {message}")


def probabilities(who: str, outputs: np.ndarray, from_logits: bool) -> np.ndarray:
    """Class probabilities [n, classes] (float64) from a label head's outputs [n, units].

    One unit is a binary task: P(class 1) = p (or sigmoid(logit)), returned as
    `[1 - p, p]`. Several units are one distribution over the classes:
    softmax probabilities as they are, or logits through a softmax.
    """
    outputs = np.asarray(outputs, dtype=np.float64)
    if outputs.ndim != 2 or outputs.shape[1] < 1:
        raise _fail(
            who,
            f"the label head must output [points, classes] (one unit for a binary task), got shape {outputs.shape}",
        )
    if not np.all(np.isfinite(outputs)):
        raise _fail(who, "the label head's outputs hold NaN or infinity; a validator needs finite outputs")
    if outputs.shape[1] == 1:
        p = 1.0 / (1.0 + np.exp(-outputs[:, 0])) if from_logits else outputs[:, 0]
        if not from_logits and (p.min() < 0.0 or p.max() > 1.0):
            raise _fail(
                who, "a one-unit label head's outputs must be probabilities in [0, 1] (or pass from_logits=True)"
            )
        return np.stack([1.0 - p, p], axis=1)
    if from_logits:
        shifted = outputs - outputs.max(axis=1, keepdims=True)
        e = np.exp(shifted)
        return e / e.sum(axis=1, keepdims=True)
    if outputs.min() < 0.0 or not np.allclose(outputs.sum(axis=1), 1.0, atol=1e-3):
        raise _fail(
            who,
            "the label head's outputs are not class probabilities (each row must be >= 0 and sum to 1); "
            "accepted: a softmax over the classes, one sigmoid unit, or logits with from_logits=True",
        )
    return outputs


def class_labels(who: str, y: np.ndarray, classes: int) -> np.ndarray:
    """Integer class labels [n] from sparse labels ([n] or [n, 1]) or one-hot rows [n, classes]."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == classes and classes > 1:
        # Only one-hot rows: an argmax would take any float array of this shape (points passed as labels).
        if not np.all(np.all((y == 0) | (y == 1), axis=1) & (y.sum(axis=1) == 1)):
            raise _fail(who, f"labels of shape {y.shape} must be one-hot rows (one 1 among zeros per point)")
        return y.argmax(axis=1)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise _fail(who, f"labels must be [points], [points, 1] or one-hot [points, {classes}], got shape {y.shape}")
    labels = np.rint(y).astype(np.int64)
    if not np.array_equal(labels, y) or labels.min() < 0 or labels.max() >= classes:
        raise _fail(who, f"labels must be class numbers 0 .. {classes - 1} for a head of {classes} classes")
    return labels


def accuracy(p: np.ndarray, labels: np.ndarray) -> float:
    """The share of points whose most probable class is their label."""
    return float(np.mean(p.argmax(axis=1) == labels))


def _entropies(p: np.ndarray) -> np.ndarray:
    """Entropy of each row of probabilities, in nats (0 log 0 = 0)."""
    return -np.sum(p * np.log(np.clip(p, TINY, 1.0)), axis=1)


def prediction_entropy(p: np.ndarray) -> float:
    """Minus the mean entropy of the predictions: higher is more confident."""
    return float(-np.mean(_entropies(p)))


def information_maximization(p: np.ndarray) -> float:
    """The entropy of the mean prediction (diversity) minus the mean entropy (confidence)."""
    return float(_entropies(p.mean(axis=0, keepdims=True))[0] - np.mean(_entropies(p)))


def soft_neighborhood_density(points: np.ndarray, temperature: float, block: int = 1024) -> float:
    """SND (Saito et al. 2021): the mean entropy of each point's softmax over its
    cosine similarities to the other points, at `temperature`.

    Each row of `points` is L2-normalised; a point's similarity to itself is
    set to -1 / temperature, as the authors' code does, so that it takes no
    part. Rows are worked `block` at a time (memory block x n).
    """
    x = np.asarray(points, dtype=np.float64)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    n = len(x)
    total = 0.0
    for start in range(0, n, block):
        rows = x[start : start + block] @ x.T / temperature
        rows[np.arange(len(rows)), np.arange(start, start + len(rows))] = -1.0 / temperature
        rows -= rows.max(axis=1, keepdims=True)
        e = np.exp(rows)
        total += float(np.sum(_entropies(e / e.sum(axis=1, keepdims=True))))
    return total / n


def logistic_regression(x: np.ndarray, y: np.ndarray, c: float = 1.0, iterations: int = 100) -> tuple:
    """`(w, b)` of the L2-regularised logistic regression `0.5 |w|^2 + c * sum(log loss)`
    (the intercept `b` unpenalised: scikit-learn's default objective), solved by
    Newton's method to convergence. `y` in {0, 1}."""
    x = np.asarray(x, dtype=np.float64)
    design = np.concatenate([x, np.ones((len(x), 1))], axis=1)
    theta = np.zeros(design.shape[1])
    penalty = np.ones(design.shape[1]) / c
    penalty[-1] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(design @ theta)))
        gradient = design.T @ (p - y) + penalty * theta
        hessian = (design * (p * (1.0 - p))[:, None]).T @ design + np.diag(penalty) + 1e-12 * np.eye(len(theta))
        step = np.linalg.solve(hessian, gradient)
        theta -= step
        if np.max(np.abs(step)) < 1e-12 * max(1.0, np.max(np.abs(theta))):
            break
    return theta[:-1], theta[-1]


def importance_weights(source_features: np.ndarray, target_features: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Density ratios p_target(f) / p_source(f) at `points`, from a logistic
    domain classifier trained on the two feature sets: `n_s / n_t * P(t|f) / P(s|f)`."""
    features = np.concatenate([source_features, target_features])
    domain = np.concatenate([np.ones(len(source_features)), np.zeros(len(target_features))])
    w, b = logistic_regression(features, domain)
    logit_source = np.asarray(points, dtype=np.float64) @ w + b  # log P(s|f) / P(t|f)
    return len(source_features) / len(target_features) * np.exp(-logit_source)


def domain_error(source_features: np.ndarray, target_features: np.ndarray, seed: int = 0) -> float:
    """The held-out error of a logistic domain classifier on the features: as many
    points of each domain (the smaller domain's count, a seeded sample of the
    larger), each domain split in halves, trained on one half of each, tested
    on the other's. 0.5: the features cannot tell the domains apart; 0: they
    always can. (Equal counts: an unbalanced classifier would call every point
    the larger domain's and score 0.5 whatever the features.)"""
    rng = np.random.default_rng(seed)
    n = min(len(source_features), len(target_features))
    s, t = rng.permutation(len(source_features))[:n], rng.permutation(len(target_features))[:n]
    s_fit, s_test, t_fit, t_test = s[: len(s) // 2], s[len(s) // 2 :], t[: len(t) // 2], t[len(t) // 2 :]
    w, b = logistic_regression(
        np.concatenate([source_features[s_fit], target_features[t_fit]]),
        np.concatenate([np.ones(len(s_fit)), np.zeros(len(t_fit))]),
    )
    source_wrong = np.mean(source_features[s_test] @ w + b <= 0.0)
    target_wrong = np.mean(target_features[t_test] @ w + b > 0.0)
    return float((source_wrong + target_wrong) / 2)


def deep_embedded_risk(weights: np.ndarray, losses: np.ndarray) -> float:
    """DEV's risk (You et al. 2019): the importance-weighted mean loss with the
    weights as control variate, `mean(w l) + eta mean(w) - eta`, where
    `eta = -cov(w l, w) / var(w)` (0 when the weights do not vary). Lower is better."""
    weighted = weights * losses
    variance = np.var(weights, ddof=1)
    eta = 0.0 if variance == 0 else -np.cov(weighted, weights)[0, 1] / variance
    return float(np.mean(weighted) + eta * np.mean(weights) - eta)


def cross_entropy(p: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Each point's cross-entropy loss in nats."""
    return -np.log(np.clip(p[np.arange(len(labels)), labels], TINY, 1.0))


def ensemble_agreement(pool: list) -> np.ndarray:
    """EnsV (Hu et al., NeurIPS 2024): each candidate's agreement with the pool's
    ensemble. The candidates' target probabilities (each [n, classes], the same
    points in the same order) are averaged; the average's most probable class
    is each point's pseudo-label; a candidate scores the share of points whose
    most probable class is that pseudo-label. One score per candidate, in the
    pool's order (the authors' code, LHXXHB/EnsV: softmax, mean, argmax, then
    each candidate's argmax against it).

    The paper's certificate is the ensemble's: for a convex loss the averaged
    predictions' loss is at most the candidates' mean loss, so at most the
    worst candidate's (Jensen). The candidate closest to the ensemble is not
    certified the same way: in a pool where most candidates share one error,
    the ensemble holds it too."""
    pool = [np.asarray(p, dtype=np.float64) for p in pool]
    if not pool or any(p.ndim != 2 or p.shape != pool[0].shape for p in pool):
        raise ValueError(
            "ensemble_agreement: the pool must be one or more candidates' probabilities [points, classes] on "
            f"the same target points, got shapes {[p.shape for p in pool]}"
        )
    stacked = np.stack(pool)
    pseudo = stacked.mean(axis=0).argmax(axis=1)
    return np.mean(stacked.argmax(axis=2) == pseudo[None, :], axis=1)


def mixed_sample_consistency(p: np.ndarray, mixed_p: np.ndarray, permutation: np.ndarray, ratio: float) -> float:
    """MixVal (Hu et al., NeurIPS 2023), from a model's predictions: the target
    points `x` and their mixtures `ratio * x + (1 - ratio) * x[permutation]`.

    Each point's pseudo-label is its most probable class; a mixture's label is
    that of the point it holds more of (`x`'s when ratio >= 0.5). Mixtures of
    two points with the same pseudo-label (intra-cluster) and with different
    ones (inter-cluster) are scored apart, each by the share whose prediction
    is the mixture's label; the score is their mean (the one there is, when the
    other set is empty), as skada's `MixValScorer(ice_type="both")` combines
    them (the authors' code, LHXXHB/MixVal, computes each in a script of its
    own)."""
    if not len(p) == len(mixed_p) == len(permutation):
        raise ValueError(
            "mixed_sample_consistency: p, mixed_p and permutation must cover the same points, got "
            f"{len(p)}, {len(mixed_p)} and {len(permutation)}"
        )
    labels = np.asarray(p).argmax(axis=1)
    partner = labels[np.asarray(permutation)]
    expected = labels if ratio >= 0.5 else partner
    hit = np.asarray(mixed_p).argmax(axis=1) == expected
    same = labels == partner
    parts = [float(np.mean(hit[m])) for m in (same, ~same) if np.any(m)]
    return float(np.mean(parts))


def batch_nuclear_norm(p: np.ndarray) -> float:
    """BNM (Cui et al., CVPR 2020) as pytorch-adapt scores it: the nuclear norm
    (sum of singular values) of the [n, classes] target probabilities, divided
    by n. High when predictions are confident and spread over many classes."""
    p = np.asarray(p, dtype=np.float64)
    return float(np.linalg.svd(p, compute_uv=False).sum() / len(p))
