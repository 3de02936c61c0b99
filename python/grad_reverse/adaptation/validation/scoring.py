"""Scoring with many validators at once: one model's scores with its
outputs computed once (`score_all`: `ValidatorCallback`), and a pool of
candidates' (`score_candidates`: `select_without_labels`), where the pool
validators score the candidates against each other."""

from __future__ import annotations

from typing import Any

from grad_reverse.adaptation.validation.base import PoolValidator, Validator
from grad_reverse.adaptation.validation.outputs import Outputs, as_array_points, check_candidates, model_outputs


def _refuse_pool_validators(who: str, validators: list) -> None:
    for v in validators:
        if isinstance(v, PoolValidator):
            raise ValueError(f"{who}: " + str(v._refuse()))


def score_all(
    who: str,
    validators: list,
    model: Any,
    x_source: Any,
    y_source: Any,
    x_target: Any,
    from_logits: bool | None,
    outputs: Outputs | None = None,
) -> dict:
    """`{validator name: score}` of `model`, its outputs computed once (or given) for the
    validators that read them; a pool validator is refused (it scores no model alone)."""
    _refuse_pool_validators(who, validators)
    for v in validators:
        v.check_sizes(len(x_source), len(x_target))
    result = {}
    for v in validators:
        if type(v).__call__ is Validator.__call__:
            if outputs is None:
                outputs = model_outputs(who, model, x_source, y_source, x_target, from_logits)
            result[v.name] = v.score_model(outputs, model, x_target, from_logits)
        else:  # a validator that does more than read outputs (reverse validation trains)
            result[v.name] = v(model, x_source, y_source, x_target, from_logits=from_logits)
    return result


def score_candidates(
    who: str,
    validators: list,
    candidates: Any,
    x_source: Any,
    y_source: Any,
    x_target: Any,
    from_logits: bool | None,
    outputs: dict | None = None,
) -> dict:
    """`{candidate name: {validator name: score}}`: each candidate's outputs computed
    once (or given: `{candidate name: Outputs}`), the one-model validators scored
    on each, the pool validators on all at once. The candidates are checked
    first (`check_candidates`)."""
    check_candidates(who, candidates, validators)
    x_source, x_target = as_array_points(who, "x_source", x_source), as_array_points(who, "x_target", x_target)
    single = [v for v in validators if not isinstance(v, PoolValidator)]
    pool = [v for v in validators if isinstance(v, PoolValidator)]
    for v in validators:
        v.check_sizes(len(x_source), len(x_target))
    if outputs is None:
        outputs = {n: model_outputs(who, m, x_source, y_source, x_target, from_logits) for n, m in candidates.items()}
    table = {
        name: score_all(who, single, m, x_source, y_source, x_target, from_logits, outputs[name])
        for name, m in candidates.items()
    }
    for v in pool:
        for name, value in zip(candidates, v.score_pool([outputs[name] for name in candidates])):
            table[name][v.name] = float(value)
    return {name: {v.name: table[name][v.name] for v in validators} for name in candidates}
