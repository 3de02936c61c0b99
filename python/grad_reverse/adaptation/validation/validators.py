"""Validators: scoring a trained model for a target domain whose labels are unknown.

Each validator takes a trained model, held-out labeled source points and
unlabeled target points, and returns one number where **higher is better**,
so that Keras' `ModelCheckpoint(monitor=..., mode="max")`, `EarlyStopping`
and KerasTuner's `Objective(..., "max")` can use it as they are
(`ValidatorCallback` writes the scores into the epoch's logs).

    score = SoftNeighborhoodDensity()(model, x_source_val, y_source_val, x_target)

The model may be a `DANN`, `CDAN` or `MDD` (features: its feature
extractor's output) or any Keras classifier (features: its class
probabilities). Its label head must end in a softmax, one sigmoid unit, or
a linear layer (logits, told from a cross-entropy loss or `from_logits`):
the validators score classifiers (`outputs.label_from_logits` has the
rule). The arithmetic is numpy on the model's `predict` outputs
(`validation.scores`), so it runs on every Keras backend.

`EnsembleValidation` (EnsV) is a pool validator: it scores candidates
against each other, so only `select_without_labels` (through
`score_candidates`) uses it.

This module holds the names: `VALIDATORS`, `POOL_VALIDATORS`, the default
(`DEFAULT_VALIDATOR`) and `validator`, which turns a name into a validator
and refuses an unknown one with the names the caller accepts. The
validators themselves are in `one_model` and `pool`, the scoring of many at
once in `scoring`; every name is importable from here too.

Which validator to trust is a measured question, not a theoretical one:
docs/results/validators.md has the study on this project's shifts, and
`DEFAULT_VALIDATOR` is the one it picked.
"""

from __future__ import annotations

from typing import Any

from grad_reverse.adaptation.validation import rule as _rule
from grad_reverse.adaptation.validation.base import PoolValidator, Validator  # noqa: F401 (public here too)
from grad_reverse.adaptation.validation.one_model import (  # noqa: F401 (public here too)
    BatchNuclearNorm,
    DeepEmbeddedValidation,
    InformationMaximization,
    MixVal,
    PredictionEntropy,
    SoftNeighborhoodDensity,
    SourceAccuracy,
    SourceAccuracyAndAlignment,
)
from grad_reverse.adaptation.validation.outputs import (  # noqa: F401 (model_outputs, Outputs: public here too)
    Outputs,
    as_array_points,
    check_candidates,
    label_from_logits,
    model_outputs,
    predicted_probabilities,
)
from grad_reverse.adaptation.validation.pool import EnsembleValidation
from grad_reverse.adaptation.validation.scoring import score_all, score_candidates  # noqa: F401 (public here too)

# Chosen from the study (docs/results/validators.md), not from the papers: among
# the candidates' last checkpoints it was never more than 1 point below the plain
# network on any shift (mean over seeds), and its choice on label-shifted blobs
# was never DANN on both CPU paths tried (`source_and_alignment`, the other
# validator within 1 point everywhere, chose DANN there on some seeds). It
# cannot see a label shift or what adapting gains on the target; it sees what
# adapting costs on the source.
DEFAULT_VALIDATOR = "source_accuracy"
"""The validator `select_without_labels` chooses by when given none
(`DEFAULT_CHOICE` is this name): `"source_accuracy"`, the held-out source
accuracy (`SourceAccuracy`), the plain network winning ties. The study on
this project's shifts (docs/results/validators.md) found it never more than 1
point below the plain network, on average over seeds; it cannot see what
adapting gains on the target, only what it costs on the source."""

VALIDATORS = {
    "source_accuracy": SourceAccuracy,
    "entropy": PredictionEntropy,
    "im": InformationMaximization,
    "snd": SoftNeighborhoodDensity,
    "dev": DeepEmbeddedValidation,
    "source_and_alignment": SourceAccuracyAndAlignment,
    "bnm": BatchNuclearNorm,
    "mixval": MixVal,
}
"""The validators that score one model, `{name: class}`: `"source_accuracy"`,
`"entropy"`, `"im"`, `"snd"`, `"dev"`, `"source_and_alignment"`, `"bnm"`,
`"mixval"`. These names are what `ValidatorCallback` takes (each score logged
as `val_<name>`) and what `select_without_labels(validator_name=...)` and
its `also=` take, beside `POOL_VALIDATORS`' names and the rule
`"gated_mixval"` (`select_without_labels` only). A name builds the class with
its defaults; for other settings pass an instance, e.g.
`SoftNeighborhoodDensity(temperature=0.1)`."""

POOL_VALIDATORS = {"ensv": EnsembleValidation}
"""The validators that score a pool of candidates at once, each against the
others, `{name: class}`: `"ensv"` (`EnsembleValidation`). Only
`select_without_labels` takes them (`validator_name="ensv"` or
`also=("ensv",)`): they have no score of one model, so `ValidatorCallback`
and a call on a model refuse them."""


def _names(pool: bool, rule: bool) -> str:
    """The names a caller accepts, grouped, for its refusal of an unknown one."""
    groups = [f"one-model validators {sorted(VALIDATORS)}"]
    if pool:
        groups.append(f"pool validators {sorted(POOL_VALIDATORS)}")
    if rule:
        groups.append(f"the rule {_rule.NAME!r}")
    return ", ".join(groups)


def validator(name_or_validator: Any, *, who: str = "validator", pool: bool = True, rule: bool = False) -> Validator:
    """A validator from its name or itself; an unknown name refused with the names `who` accepts.

    Args:
      name_or_validator: a `Validator`, or a name of `VALIDATORS` (or, with
        `pool`, of `POOL_VALIDATORS`).
      who: the caller, named in the refusal.
      pool: whether the caller takes pool validators (`select_without_labels`
        does; `ValidatorCallback` does not, and says why).
      rule: whether the caller also takes the rule's name (which it handles
        itself): listed among the accepted names.

    Raises:
      ValueError: an unknown name, or a pool validator where `pool` is False.
    """
    if isinstance(name_or_validator, Validator):
        found = name_or_validator
    elif isinstance(name_or_validator, str) and name_or_validator in {**VALIDATORS, **POOL_VALIDATORS}:
        found = {**VALIDATORS, **POOL_VALIDATORS}[name_or_validator]()
    else:
        raise _unknown(name_or_validator, who, pool, rule)
    if isinstance(found, PoolValidator) and not pool:
        raise ValueError(f"{who}: {found._refuse()}")
    return found


def _unknown(name: Any, who: str, pool: bool, rule: bool) -> ValueError:
    if name == "reverse":
        return ValueError(
            f"{who}: validator 'reverse' trains a second model of the candidate's configuration, so it has no "
            "default: build it as ReverseValidator(make_model) (grad_reverse.adaptation), make_model "
            "returning a fresh compiled model, and pass that"
        )
    message = f"{who}: unknown validator {name!r}; accepted: a Validator, or a name: {_names(pool, rule)}"
    known = [*VALIDATORS, *(POOL_VALIDATORS if pool else ()), *([_rule.NAME] if rule else [])]
    if isinstance(name, str) and name.lower() in known:
        message += f" (names are lower case: {name.lower()!r})"
    if not pool:
        message += (
            f". A pool validator ({', '.join(map(repr, sorted(POOL_VALIDATORS)))}) or the rule "
            f"{_rule.NAME!r} scores candidates against each other, not one model: select_without_labels takes them"
        )
    return ValueError(message)
