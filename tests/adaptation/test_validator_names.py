"""The names of the ways of choosing: each function refuses an unknown name
with exactly the names it accepts, and every name the docs show as a way of
choosing is accepted where it is shown, or marked as the study's only.
No model is trained: the names are checked before any model is read."""

import re
from pathlib import Path

import numpy as np
import pytest

from grad_reverse.adaptation import (
    POOL_VALIDATORS,
    VALIDATORS,
    EnsembleValidation,
    ValidatorCallback,
    select_without_labels,
)
from grad_reverse.adaptation.validation import rule

ROOT = Path(__file__).resolve().parents[2]
ONE_MODEL = sorted(VALIDATORS)
POOL = sorted(POOL_VALIDATORS)


def accepted_part(message: str) -> str:
    """What a refusal lists as accepted (up to the explanation that may follow)."""
    return message.split("accepted:", 1)[1].split(". ", 1)[0]


def refusal(call) -> str:
    with pytest.raises(ValueError) as raised:
        call()
    return str(raised.value)


def points(n: int = 8) -> np.ndarray:
    return np.random.default_rng(0).normal(size=(n, 2)).astype("float32")


def test_the_tables_keys_are_the_validators_own_names():
    assert {name: cls.name for name, cls in VALIDATORS.items()} == {name: name for name in VALIDATORS}
    assert {name: cls.name for name, cls in POOL_VALIDATORS.items()} == {name: name for name in POOL_VALIDATORS}


def test_select_without_labels_lists_every_name_it_accepts_and_the_lower_case_one_meant():
    message = refusal(lambda: select_without_labels({}, points(), np.zeros(8), points(), validator_name="EnsV"))
    assert message.startswith("select_without_labels: unknown validator 'EnsV'")
    listed = set(re.findall(r"'(\w+)'", accepted_part(message)))
    assert listed == set(ONE_MODEL) | set(POOL) | {rule.NAME}, message
    assert "(names are lower case: 'ensv')" in message


def test_select_without_labels_accepts_the_rule_name_it_lists():
    # Past the name: the refusal is the empty candidates', not an unknown name's.
    message = refusal(lambda: select_without_labels({}, points(), np.zeros(8), points(), validator_name=rule.NAME))
    assert message.startswith("select_without_labels: no candidates"), message


def test_also_lists_the_validators_and_not_the_rule_it_does_not_take():
    message = refusal(lambda: select_without_labels({}, points(), np.zeros(8), points(), also=(rule.NAME,)))
    assert message.startswith("select_without_labels (also): unknown validator 'gated_mixval'")
    assert set(re.findall(r"'(\w+)'", accepted_part(message))) == set(ONE_MODEL) | set(POOL)


def test_the_callback_lists_only_one_model_validators_and_says_why_the_others_are_refused():
    message = refusal(lambda: ValidatorCallback([rule.NAME], points(), np.zeros(8), points()))
    assert message.startswith("ValidatorCallback: unknown validator 'gated_mixval'")
    assert set(re.findall(r"'(\w+)'", accepted_part(message))) == set(ONE_MODEL), message
    assert "scores candidates against each other, not one model: select_without_labels takes them" in message


@pytest.mark.parametrize("given", ["ensv", EnsembleValidation()], ids=["name", "instance"])
def test_the_callback_refuses_a_pool_validator_saying_where_it_goes(given):
    message = refusal(lambda: ValidatorCallback([given], points(), np.zeros(8), points()))
    assert message.startswith("ValidatorCallback: EnsembleValidation ('ensv') scores a pool of candidates")
    assert "pass it to select_without_labels" in message


def test_the_api_page_lists_the_names_each_way_in_accepts():
    page = (ROOT / "docs" / "api" / "adaptation.md").read_text(encoding="utf-8")
    section = page.split("## Choosing by name", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    named = {name for row in rows for name in re.findall(r"`(\w+)`", row.split("|")[1])}
    assert named == set(ONE_MODEL) | set(POOL) | {rule.NAME}


def test_every_choice_the_results_tables_name_is_accepted_or_marked_as_the_studys_only():
    page = (ROOT / "docs" / "results" / "validators.md").read_text(encoding="utf-8")
    # Round three's tables list results (plain, ensemble, student, ...), not names a function takes.
    start = page.index("## Combine, then teach")
    page = page[:start] + page[page.index("\n## ", start + 1) :]
    choices = set(re.findall(r"^\| (\w+) \| \d+ \| [-+]\d", page, re.M))  # summaries: | choice | shifts | worst |
    choices |= set(re.findall(r"^\| [\w-]+ \| (\w+) \| \d+ \|", page, re.M))  # per shift: | shift | choice | seeds |
    accepted = set(ONE_MODEL) | set(POOL) | {rule.NAME}
    assert {"source_accuracy", "ensv", rule.NAME, "gated_im"} <= choices
    study_only = sorted(choices - accepted)
    assert all(c.startswith("gated_") for c in study_only), study_only
    assert "were compared by the study only: the package does\nnot accept them" in page
