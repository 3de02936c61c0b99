"""What the demo's user would see without target labels: per seed, the model
that `select_without_labels`' default picks among the seed's trained
models, beside the target accuracy of each (which the choice cannot see).

Each seed's models are scored on held-out source points no model trained on
(a fresh draw of a generated problem's source distribution; the test set's
grey images for fashion-mnist-m) and on the unlabeled target points, at most
`POINTS` of each (a seeded sample). The plain network (trained on the source only) is
always a candidate, so "don't adapt" is always an answer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Held-out source points of a generated problem: its source drawn again from this seed offset.
HELD_OUT_SEED = 10_000
POINTS = 2000
PLAIN = "plain"  # the demo's name of the plain network, as select_without_labels' default


def _sample(seed: int, *arrays: np.ndarray) -> tuple:
    n = len(arrays[0])
    if n <= POINTS:
        return arrays
    keep = np.sort(np.random.default_rng(seed).choice(n, POINTS, replace=False))
    return tuple(a[keep] for a in arrays)


def selection(models: dict, x_source: np.ndarray, y_source: np.ndarray, x_target: np.ndarray, seed: int) -> Any:
    """`select_without_labels`' result (its default) for one seed's trained `models`
    (`{method: model}`, the plain network under `PLAIN`): the pick and the gated ensemble."""
    from grad_reverse.adaptation import select_without_labels

    x_source, y_source = _sample(seed, x_source, y_source)
    (x_target,) = _sample(seed + 1, x_target)
    return select_without_labels(models, x_source, y_source, x_target, plain=PLAIN)


def choose(models: dict, x_source: np.ndarray, y_source: np.ndarray, x_target: np.ndarray, seed: int) -> str:
    """The method `select_without_labels` (its default) picks among one
    seed's trained `models` (`{method: model}`, the plain network under `PLAIN`)."""
    return selection(models, x_source, y_source, x_target, seed).name


def summary(picks: list, accuracy: dict, seeds: list, ensemble: list | None = None) -> str:
    """The lines the demo prints under its table: `picks` holds each seed's
    chosen method, `accuracy` each method's target accuracy per seed, and
    `ensemble` (if given) the gated ensemble's target accuracy per seed."""
    from grad_reverse.adaptation.validation.selection import DEFAULT_CHOICE

    lines = [
        f"Without target labels: the model select_without_labels' default ({DEFAULT_CHOICE}) picks per seed,",
        "beside each model's target accuracy, which the choice cannot see:",
    ]
    chosen = []
    for i, (seed, pick) in enumerate(zip(seeds, picks)):
        chosen.append(accuracy[pick][i])
        others = "  ".join(f"{m} {accuracy[m][i]:.3f}" for m in accuracy)
        lines.append(f"  seed {seed}: picks {pick:12s} ({accuracy[pick][i]:.3f})   [{others}]")
    means = ", ".join(f"{m} {np.mean(v):.3f}" for m, v in accuracy.items())
    lines.append(f"Mean target accuracy of the picks: {np.mean(chosen):.3f} (every seed's same method: {means}).")
    lines.append(
        "  (It picks the model that classifies held-out source points best, a tie going to plain: it sees "
        "what adapting costs on the source, not what it gains on the target. docs/demo.md explains the block.)"
    )
    if ensemble:
        per_seed = "  ".join(f"seed {seed} {value:.3f}" for seed, value in zip(seeds, ensemble))
        lines.append(
            f"The gated ensemble (Selection.ensemble: the mean of the probabilities of plain and of the models "
            f"the source gate keeps): {per_seed}; mean {np.mean(ensemble):.3f}."
        )
    return "\n".join(lines)
