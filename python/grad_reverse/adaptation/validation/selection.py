"""Choosing among trained candidates without target labels, the plain network
(no adaptation) always among them, so that "don't adapt" is an answer."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from grad_reverse.adaptation.validation.validators import DEFAULT_VALIDATOR, score_all, validator


@dataclasses.dataclass
class Selection:
    """The result of `select_without_labels`.

    Attributes:
      name: the chosen candidate's name (`plain` when adapting did not score higher).
      model: the chosen candidate.
      table: `{candidate name: {validator name: score}}` for every candidate,
        the chosen one's validator deciding.
      validator: the name of the validator that chose.
      plain: the name of the plain network among the candidates.
    """

    name: str
    model: Any
    table: dict
    validator: str
    plain: str

    @property
    def adapted(self) -> bool:
        """Whether an adapted model was chosen over the plain network."""
        return self.name != self.plain

    def report(self) -> str:
        """The table as text, one candidate per line, best first, the choice marked."""
        names = sorted(self.table, key=lambda n: -self.table[n][self.validator])
        columns = list(next(iter(self.table.values())))
        lines = ["  ".join([f"{'candidate':24s}"] + [f"{c:>16s}" for c in columns])]
        for n in names:
            mark = " <- chosen" if n == self.name else (" (plain)" if n == self.plain else "")
            lines.append("  ".join([f"{n:24s}"] + [f"{self.table[n][c]:16.4f}" for c in columns]) + mark)
        return "\n".join(lines)


def select_without_labels(
    candidates: Mapping[str, Any],
    x_source: Any,
    y_source: Any,
    x_target: Any,
    *,
    plain: str = "plain",
    validator_name: Any = DEFAULT_VALIDATOR,
    also: tuple = (),
    from_logits: bool | None = None,
) -> Selection:
    """Chooses among trained models by a validator, with no target label.

    Args:
      candidates: `{name: trained model}`: methods x lambdas x checkpoints,
        and the plain network (trained on the source alone, e.g. a DANN
        compiled with `domain_loss_weight=0`), named `plain`. A candidate set
        without it is refused: without it, the choice cannot be "don't adapt".
      x_source, y_source: held-out labeled source points (no candidate trained on them).
      x_target: unlabeled target points.
      validator_name: the validator that chooses (a name or a `Validator`);
        default `DEFAULT_VALIDATOR` (held-out source accuracy), the one the
        study picked (docs/results/validators.md).
      also: more validators to score in the table, for the record.

    Returns a `Selection`: the highest-scoring candidate; a tie goes to the
    plain network (adapting must earn its place).
    """
    if plain not in candidates:
        raise ValueError(
            f"select_without_labels: the candidates must include the plain network (no adaptation) as "
            f"{plain!r}, so that the choice can be not to adapt; got {sorted(candidates)}"
        )
    chooser = validator(validator_name)
    others = [validator(v) for v in also]
    scorers = [chooser] + [v for v in others if v.name != chooser.name]
    table: dict = {}
    for name, model in candidates.items():
        table[name] = score_all("select_without_labels", scorers, model, x_source, y_source, x_target, from_logits)
    best = plain
    for name in candidates:
        if table[name][chooser.name] > table[best][chooser.name]:
            best = name
    return Selection(name=best, model=candidates[best], table=table, validator=chooser.name, plain=plain)
