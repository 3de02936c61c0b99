"""Choosing among trained candidates without target labels, the plain network
(no adaptation) always among them, so that "don't adapt" is an answer."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from grad_reverse.adaptation.validation import rule, scores
from grad_reverse.adaptation.validation.outputs import (
    as_array_points,
    check_candidates,
    label_from_logits,
    model_outputs,
)
from grad_reverse.adaptation.validation.validators import DEFAULT_VALIDATOR, MixVal, score_candidates, validator

# The default choice: held-out source accuracy, the plain network winning ties.
# The gate-then-MixVal rule (`rule`, "gated_mixval") was fixed from the study's
# first six shifts (commit ba12aa6) and then lost 6 and 8 points to the plain
# network on the two new shifts it met (digits-rotated, moons-scaled); it stays
# available by name, and the default went back to the choice that stayed within
# 1 point of the plain network there (docs/results/validators.md).
DEFAULT_CHOICE = DEFAULT_VALIDATOR
"""What `select_without_labels` chooses by when `validator_name` is not given:
`DEFAULT_VALIDATOR`, `"source_accuracy"` (the held-out source accuracy, the
plain network winning ties). The rule `"gated_mixval"` is chosen by name; why
it is not the default: [docs/results/validators.md](../results/validators.md)."""


@dataclasses.dataclass
class Selection:
    """The result of `select_without_labels`.

    Attributes:
      name: the chosen candidate's name (`plain` when adapting did not score higher).
      model: the chosen candidate.
      table: `{candidate name: {column: score}}` for every candidate: the
        column that decided (`validator`), and what else was scored.
      validator: the name of the column that decided: the validator's name
        (`source_accuracy` by default), or `gated_mixval` for the rule (with
        `source_accuracy` and `gated`, 1.0 or 0.0, beside it).
      plain: the name of the plain network among the candidates.
      ensemble: a `ProbabilityEnsemble`, one Keras model: the mean of the
        class probabilities of the plain network and of every candidate the
        source gate keeps (held-out source accuracy at least `gate_floor`);
        it predicts, saves as `.keras` and exports for serving.
      ensemble_table: `{candidate name: {"source_accuracy", "in_ensemble"
        (1.0 or 0.0)}}` for every candidate (`ensemble_report()` says why
        each was held or left out).
      gate_floor: the held-out source accuracy a candidate needs to join
        the ensemble: the plain network's minus `rule.gate_margin`.
    """

    name: str
    model: Any
    table: dict
    validator: str
    plain: str
    ensemble: Any = None
    ensemble_table: dict = dataclasses.field(default_factory=dict)
    gate_floor: float = float("nan")

    @property
    def ensemble_members(self) -> list:
        """The names of the candidates `ensemble` averages, in the candidates' order."""
        return [n for n, row in self.ensemble_table.items() if row["in_ensemble"]]

    def ensemble_report(self) -> str:
        """Which candidates the ensemble holds, and why each other one was left out."""
        lines = [
            f"ensemble: the mean of {len(self.ensemble_members)} candidates' probabilities; the source gate keeps "
            f"a candidate whose held-out source accuracy is at least {self.gate_floor:.4f} (the plain network's "
            "minus two standard errors of the held-out sample)"
        ]
        for n, row in self.ensemble_table.items():
            why = "held" if row["in_ensemble"] else "left out: held-out source accuracy below the gate's floor"
            lines.append(f"  {n:24s} source accuracy {row['source_accuracy']:.4f}  {why}")
        return "\n".join(lines)

    @property
    def adapted(self) -> bool:
        """Whether an adapted model was chosen over the plain network."""
        return self.name != self.plain

    def report(self) -> str:
        """The table as text, one candidate per line, best first (a candidate the
        rule's gate refused last, its score `nan`), the choice marked."""

        def order(n: str) -> tuple:
            value = self.table[n][self.validator]
            return (math.isnan(value), -value if not math.isnan(value) else 0.0, n)

        names = sorted(self.table, key=order)
        columns = list(next(iter(self.table.values())))
        lines = ["  ".join([f"{'candidate':24s}"] + [f"{c:>20s}" for c in columns])]
        for n in names:
            mark = " <- chosen" if n == self.name else (" (plain)" if n == self.plain else "")
            lines.append("  ".join([f"{n:24s}"] + [f"{self.table[n][c]:20.4f}" for c in columns]) + mark)
        return "\n".join(lines)


def select_without_labels(
    candidates: Mapping[str, Any],
    x_source: Any,
    y_source: Any,
    x_target: Any,
    *,
    plain: str = "plain",
    validator_name: Any = DEFAULT_CHOICE,
    also: tuple = (),
    from_logits: bool | None = None,
) -> Selection:
    """Chooses among trained models with no target label.

        selection = select_without_labels(
            {"plain": plain, "dann@1": dann, "dann@0.3": dann_small},
            x_source_val, y_source_val, x_target)  # by held-out source accuracy
        print(selection.report())  # the table, best first, the choice marked
        model = selection.model  # the plain network unless adapting scored higher

        select_without_labels(candidates, x_source_val, y_source_val, x_target,
                              validator_name="gated_mixval", also=("ensv", "im"))

    Args:
      candidates: `{name: trained model}` (a dict): methods x lambdas x
        checkpoints, and the plain network (trained on the source alone, e.g.
        a DANN compiled with `domain_loss_weight=0`) under the name `plain`.
        A candidate set without it is refused: without it, the choice cannot
        be "don't adapt".
      x_source, y_source: held-out labeled source points (no candidate trained on them).
      x_target: unlabeled target points (an array).
      plain: the plain network's name among the candidates.
      validator_name: what chooses, the highest score winning. The names
        accepted: a one-model validator's (`VALIDATORS`: `"source_accuracy"`,
        the default `DEFAULT_CHOICE`; `"entropy"`, `"im"`, `"snd"`, `"dev"`,
        `"source_and_alignment"`, `"bnm"`, `"mixval"`), a pool validator's
        (`POOL_VALIDATORS`: `"ensv"`, each candidate scored against the
        others), or the rule `"gated_mixval"` (the candidates within the
        held-out sample's noise of the plain network's source accuracy,
        ranked by MixVal on the target; the module
        `grad_reverse.adaptation.validation.rule` documents it): it gained on
        the study's first six shifts and lost on two new ones
        ([docs/results/validators.md](../results/validators.md), whose other
        `gated_<name>` rows are the study's only). Or a `Validator` instance.
      also: more validators to score in the table, for the record (the names
        of `VALIDATORS` and `POOL_VALIDATORS`, or instances).
      from_logits: whether the label heads output logits; default: told from
        each head's last activation.

    Returns:
      The chosen name and model, the table of scores, and the gated
        candidates' ensemble (`Selection.ensemble`), as a
        [`Selection`][grad_reverse.adaptation.Selection]. Ties are broken the
        same way whatever the dict's order, the plain network first (adapting
        must earn its place), then (the rule only) the higher held-out source
        accuracy, then the name that sorts first.

    Raises:
      ValueError: an unknown name (the message lists the accepted ones),
        candidates without the plain network, or bad points or labels.
    """
    who = "select_without_labels"
    chooser = None if validator_name == rule.NAME else validator(validator_name, who=who, rule=True)
    scorers = [chooser] if chooser is not None else []
    scorers += [v for v in (validator(a, who=f"{who} (also)") for a in also) if v.name not in {s.name for s in scorers}]
    check_candidates(who, candidates, scorers)
    if plain not in candidates:
        raise ValueError(
            f"{who}: the candidates must include the plain network (no adaptation) as {plain!r}, so that the "
            f"choice can be not to adapt; got {sorted(candidates)}"
        )
    x_source, x_target = as_array_points(who, "x_source", x_source), as_array_points(who, "x_target", x_target)
    outputs = {n: model_outputs(who, m, x_source, y_source, x_target, from_logits) for n, m in candidates.items()}
    table = {n: {} for n in candidates}
    # Held-out source accuracy: the rule's gate and the ensemble's read it.
    accuracy = {n: scores.accuracy(o.source_probabilities, o.source_labels) for n, o in outputs.items()}
    if chooser is None:  # the default rule
        mixval = MixVal()

        def rank(gated: list) -> dict:  # MixVal predicts mixtures: only the gated candidates pay for it
            return {n: mixval.score_model(outputs[n], candidates[n], x_target, from_logits) for n in gated}

        chosen, decided = rule.choose(accuracy, rank, len(x_source), plain)
        for n in candidates:
            table[n].update(decided[n])
    found = score_candidates(who, scorers, candidates, x_source, y_source, x_target, from_logits, outputs)
    for n in candidates:
        table[n].update({k: v for k, v in found[n].items() if k not in table[n]})
    column = rule.NAME if chooser is None else chooser.name
    if chooser is not None:
        chosen = min(candidates, key=lambda n: (-table[n][column], n != plain, n))
    ensemble, ensemble_table, floor = gated_ensemble(who, candidates, accuracy, x_source, plain, from_logits)
    return Selection(
        name=chosen,
        model=candidates[chosen],
        table=table,
        validator=column,
        plain=plain,
        ensemble=ensemble,
        ensemble_table=ensemble_table,
        gate_floor=floor,
    )


def gated_ensemble(
    who: str, candidates: Mapping[str, Any], accuracy: Mapping[str, float], x_source: Any, plain: str, from_logits: Any
) -> tuple:
    """`(ProbabilityEnsemble of the plain network and the candidates the source gate keeps, {name:
    {"source_accuracy", "in_ensemble"}}, the gate's floor)`, from the candidates' held-out source
    `accuracy` on the points `x_source`."""
    from grad_reverse.adaptation.ensemble import ProbabilityEnsemble

    kept, floor = rule.gate(accuracy, len(x_source), plain)
    ensemble = ProbabilityEnsemble(
        [candidates[n] for n in kept],
        from_logits=[label_from_logits(who, candidates[n], from_logits) for n in kept],
        member_names=kept,
        name="gated_ensemble",
    )
    ensemble(x_source[:1])  # called once, as Keras' export asks of a subclassed model
    table = {n: {"source_accuracy": float(accuracy[n]), "in_ensemble": float(n in kept)} for n in candidates}
    return ensemble, table, float(floor)
