"""The validators that score a pool of candidates at once, each candidate
against the others: `select_without_labels` takes them (by name, in
`POOL_VALIDATORS`), not a model or `ValidatorCallback`."""

from __future__ import annotations

import numpy as np

from grad_reverse.adaptation.validation import scores
from grad_reverse.adaptation.validation.base import PoolValidator


class EnsembleValidation(PoolValidator):
    """EnsV (Hu et al., NeurIPS 2024 Datasets and Benchmarks): the candidates'
    averaged target probabilities as pseudo-labels, each candidate scored by
    the share of target points where its prediction agrees with them
    (`scores.ensemble_agreement`). A pool score: a candidate's score depends
    on the others, so it chooses among candidates and scores no model alone.
    It takes no arguments; `select_without_labels` builds it from its name:

        selection = select_without_labels(
            {"plain": plain, "dann@1": dann, "cdan@1": cdan},
            x_source_val, y_source_val, x_target, validator_name="ensv")
        selection.name, selection.table["dann@1"]["ensv"]

    or scores it beside the deciding column (`also=("ensv",)`). Calling it on
    a model, or giving it to `ValidatorCallback`, raises a ValueError that
    says so. Cost: the candidates' target predictions, already made.
    """

    name = "ensv"

    def score_pool(self, outputs: list) -> np.ndarray:
        return scores.ensemble_agreement([o.target_probabilities for o in outputs])
