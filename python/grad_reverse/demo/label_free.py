"""What the demo's user would see without target labels: the default
validator's score of each trained model beside its real target accuracy,
and the method the validator would pick (`grad_reverse.adaptation.validation.validators`).

Each model is scored on held-out source points no model trained on (a fresh
draw of a generated problem's source distribution; the test set's grey images
for fashion-mnist-m) and on the unlabeled target points, at most `POINTS` of
each (a seeded sample).
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Held-out source points of a generated problem: its source drawn again from this seed offset.
HELD_OUT_SEED = 10_000
POINTS = 2000
PLAIN = "source_only"


def _sample(seed: int, *arrays: np.ndarray) -> tuple:
    n = len(arrays[0])
    if n <= POINTS:
        return arrays
    keep = np.sort(np.random.default_rng(seed).choice(n, POINTS, replace=False))
    return tuple(a[keep] for a in arrays)


def score(model: Any, x_source: np.ndarray, y_source: np.ndarray, x_target: np.ndarray, seed: int) -> float:
    """The default validator's score of `model` (higher is better)."""
    from grad_reverse.adaptation.validation.validators import DEFAULT_VALIDATOR, validator

    x_source, y_source = _sample(seed, x_source, y_source)
    (x_target,) = _sample(seed + 1, x_target)
    return validator(DEFAULT_VALIDATOR)(model, x_source, y_source, x_target)


def picks(scores: dict, accuracy: dict) -> list:
    """Per seed, `(method the validator picks, its target accuracy)`: the highest
    score, a tie going to source-only (the plain network) when it ran."""
    methods = list(scores)
    order = ([PLAIN] if PLAIN in methods else []) + [m for m in methods if m != PLAIN]
    chosen = []
    for i in range(len(next(iter(scores.values())))):
        best = order[0]
        for method in order[1:]:
            if scores[method][i] > scores[best][i]:
                best = method
        chosen.append((best, accuracy[best][i]))
    return chosen


def summary(scores: dict, accuracy: dict) -> str:
    """The lines the demo prints under its table."""
    from grad_reverse.adaptation.validation.validators import DEFAULT_VALIDATOR

    chosen = picks(scores, accuracy)
    lines = [
        f"Without target labels: the {DEFAULT_VALIDATOR!r} validator's score (higher is better, mean over seeds) "
        "beside the target accuracy it cannot see:"
    ]
    for method in scores:
        lines.append(
            f"  {method:14s} score {np.mean(scores[method]):9.4f}   target accuracy {np.mean(accuracy[method]):.3f}"
        )
    names = ", ".join(f"{m} ({a:.3f})" for m, a in chosen)
    lines.append(f"It would pick, per seed: {names}; mean target accuracy {np.mean([a for _, a in chosen]):.3f}")
    if PLAIN in accuracy:
        lines.append(
            f"  (source-only, no adaptation: {np.mean(accuracy[PLAIN]):.3f}; docs/dann.md, "
            "'Choosing without target labels', says when to distrust a choice)"
        )
    return "\n".join(lines)
