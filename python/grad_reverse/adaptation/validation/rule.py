"""The default choice among trained candidates: a gate on the held-out source,
then a ranking on the target.

1. **Gate.** A candidate passes when its held-out source accuracy is at most
   `z` standard errors below the plain network's. The standard error is the
   held-out sample's own, `sqrt(2 p (1 - p) / n)` for the difference of two
   accuracies near `p` on `n` points, with `p` the plain network's accuracy
   smoothed as `(correct + 1) / (n + 2)` so that a perfect score still leaves
   a margin. No constant is tuned to a table: the margin shrinks as the
   held-out sample grows. The plain network always passes.
2. **Rank.** The gated candidates are ranked by their agreement with the
   gated pool's ensemble (EnsV, Hu et al., NeurIPS 2024): the average of
   their target probabilities gives each target point a pseudo-label, and a
   candidate scores the share of target points where it predicts that label.
   Candidates the gate refused take no part in the ensemble, so a model that
   collapsed onto a few classes neither wins nor drags the pseudo-labels.
3. **Ties** (equal agreement, to the last point) go to the plain network,
   then to the higher held-out source accuracy, then to the name that sorts
   first: the same choice whatever the candidates' order.

Why this rule: it was chosen on the study's six shifts (docs/results/
validators.md names the commit that fixed it before it met new shifts).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from grad_reverse.adaptation.validation import scores

NAME = "gated_ensv"
GATE_Z = 2.0


def gate_margin(plain_accuracy: float, n: int, z: float = GATE_Z) -> float:
    """How far below the plain network's held-out source accuracy a candidate
    may be and pass: `z` standard errors of a difference of two accuracies on
    the same `n` points, the plain network's accuracy smoothed (a Laplace
    estimate) so that 1.0 on a small sample still leaves a margin."""
    if n < 1:
        raise ValueError(f"gate_margin: needs at least one held-out source point, got {n}")
    p = (plain_accuracy * n + 1.0) / (n + 2.0)
    return z * math.sqrt(2.0 * p * (1.0 - p) / n)


def choose(
    source_accuracy: Mapping[str, float],
    target_probabilities: Mapping[str, np.ndarray],
    n_source: int,
    plain: str,
    z: float = GATE_Z,
) -> tuple[str, dict]:
    """The rule on numbers: `(chosen name, {name: {"source_accuracy", "gated", "gated_ensv"}})`.

    Args:
      source_accuracy: each candidate's held-out source accuracy.
      target_probabilities: each candidate's class probabilities [points,
        classes] on the same target points, in the same order.
      n_source: how many held-out source points the accuracies were measured on.
      plain: the plain network's name (a key of both mappings).
      z: the gate's width in standard errors.

    A candidate the gate refuses scores NaN in the ranking column.
    """
    names = list(source_accuracy)
    if plain not in source_accuracy:
        raise ValueError(f"the rule needs the plain network {plain!r} among the candidates; got {sorted(names)}")
    floor = source_accuracy[plain] - gate_margin(source_accuracy[plain], n_source, z)
    gated = [n for n in names if n == plain or source_accuracy[n] >= floor]
    agreement = dict(zip(gated, scores.ensemble_agreement([target_probabilities[n] for n in gated])))
    table = {
        n: {
            "source_accuracy": float(source_accuracy[n]),
            "gated": float(n in agreement),
            NAME: float(agreement.get(n, float("nan"))),
        }
        for n in names
    }
    chosen = min(gated, key=lambda n: (-agreement[n], n != plain, -source_accuracy[n], n))
    return chosen, table
