"""Choosing without target labels: `ValidatorCallback` driving Keras'
`ModelCheckpoint` and a KerasTuner search, and `select_without_labels`,
whose candidates always hold the plain network."""

import numpy as np
import pytest

from grad_reverse._keras import KERAS_3, keras
from grad_reverse.adaptation import (
    CDAN,
    DANN,
    DEFAULT_CHOICE,
    SoftNeighborhoodDensity,
    SourceAccuracy,
    ValidatorCallback,
    select_without_labels,
)
from helpers.models import domains, parts


def _dann(seed=0, lambda_max=1.0, plain=False):
    model = DANN(*parts(seed), lambda_max=lambda_max)
    model.compile(keras.optimizers.Adam(0.05), "binary_crossentropy", **({"domain_loss_weight": 0.0} if plain else {}))
    return model


@pytest.fixture(scope="module")
def data():
    x_source, y_source, x_target = domains(0, n_source=120)
    return x_source[:90], y_source[:90], x_source[90:], y_source[90:], x_target


def test_the_callback_logs_each_score_and_checkpoint_keeps_the_best_epoch(data, tmp_path):
    x, y, x_val, y_val, x_target = data
    model = _dann()
    path = str(tmp_path / ("best.keras" if KERAS_3 else "best.h5"))
    scorer = ValidatorCallback(["snd", SourceAccuracy()], x_val, y_val, x_target)
    best = keras.callbacks.ModelCheckpoint(
        path, monitor="val_snd", mode="max", save_best_only=True, save_weights_only=not KERAS_3
    )
    history = model.fit(
        x, y, target=x_target, batch_size=32, steps_per_epoch=5, epochs=5, seed=0, verbose=0, callbacks=[scorer, best]
    )
    snd = history.history["val_snd"]
    assert len(snd) == 5 and len(history.history["val_source_accuracy"]) == 5
    assert len(set(np.round(snd, 9))) > 1, "the score must move over the epochs for this test to tell epochs apart"
    if KERAS_3:
        kept = keras.models.load_model(path)
    else:
        kept = _dann()
        kept(x[:1])
        kept.load_weights(path)
    # The checkpoint Keras kept is the epoch the score ranked first.
    assert SoftNeighborhoodDensity()(kept, x_val, y_val, x_target) == pytest.approx(max(snd), rel=1e-5)


def test_the_callback_refuses_bad_input_before_the_first_step(data):
    x, y, x_val, y_val, x_target = data
    with pytest.raises(ValueError, match="unknown validator 'sdn'; accepted"):
        ValidatorCallback(["sdn"], x_val, y_val, x_target)
    with pytest.raises(ValueError, match="needs at least 6 held-out source points"):
        ValidatorCallback(["dev"], x_val[:4], y_val[:4], x_target)
    keras.utils.set_random_seed(0)
    features = keras.Sequential([keras.Input((2,)), keras.layers.Dense(4, activation="tanh")])
    relu_head = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="relu")])
    domain = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
    model = DANN(features, relu_head, domain)
    model.compile(keras.optimizers.Adam(0.01), "binary_crossentropy")
    with pytest.raises(ValueError, match="its last activation is 'relu'"):
        model.fit(
            x,
            y,
            target=x_target,
            batch_size=32,
            steps_per_epoch=2,
            verbose=0,
            callbacks=[ValidatorCallback(["snd"], x_val, y_val, x_target)],
        )
    assert int(model.optimizer.iterations) == 0


# KerasTuner's own deprecated threading calls (not the package's warnings).
@pytest.mark.filterwarnings("ignore::DeprecationWarning:keras_tuner")
def test_a_kerastuner_search_over_lambda_and_method(data, tmp_path):
    keras_tuner = pytest.importorskip("keras_tuner", reason="KerasTuner is not installed: pip install '.[tuner]'")
    if not KERAS_3:
        pytest.skip("KerasTuner's current releases build on Keras 3")
    x, y, x_val, y_val, x_target = data

    def build(hp):
        method = hp.Choice("method", ["dann", "cdan"])
        lambda_max = hp.Choice("lambda_max", [0.3, 3.0])
        features, label, domain = parts(0)
        if method == "cdan":  # unbuilt: CDAN builds it on its map's size
            domain = keras.Sequential([keras.layers.Dense(4, activation="relu"), keras.layers.Dense(1, "sigmoid")])
        model = (DANN if method == "dann" else CDAN)(features, label, domain, lambda_max=lambda_max)
        model.compile(keras.optimizers.Adam(0.05), "binary_crossentropy")
        return model

    tuner = keras_tuner.GridSearch(
        build, objective=keras_tuner.Objective("val_snd", "max"), directory=str(tmp_path), project_name="t"
    )
    scorer = ValidatorCallback(["snd"], x_val, y_val, x_target)
    tuner.search(
        x, y, target=x_target, batch_size=32, steps_per_epoch=5, epochs=2, seed=0, verbose=0, callbacks=[scorer]
    )
    trials = tuner.oracle.get_best_trials(num_trials=10)
    assert [t.status for t in trials] == ["COMPLETED"] * 4
    scores = {(t.hyperparameters["method"], t.hyperparameters["lambda_max"]): t.score for t in trials}
    assert all(np.isfinite(s) for s in scores.values()), scores
    best = tuner.get_best_hyperparameters(1)[0]
    assert scores[(best["method"], best["lambda_max"])] == max(scores.values())


def _candidates(seed=0):
    return {"plain": _dann(seed, plain=True), "dann@1": _dann(seed, 1.0), "dann@3": _dann(seed, 3.0)}


class _Fixed(SoftNeighborhoodDensity):
    """A validator whose score is set per model, to test the choice itself."""

    name = "fixed"

    def __init__(self, by_model):
        self.by_model = by_model

    def __call__(self, model, *args, **kwargs):
        return self.by_model[id(model)]


def test_the_selection_says_dont_adapt_when_the_plain_network_scores_highest(data):
    x, y, x_val, y_val, x_target = data
    models = _candidates()
    for plain_score, expected in ((0.9, "plain"), (0.5, "plain"), (0.1, "dann@3")):
        by_model = {id(models["plain"]): plain_score, id(models["dann@1"]): 0.2, id(models["dann@3"]): 0.5}
        chosen = select_without_labels(models, x_val, y_val, x_target, validator_name=_Fixed(by_model))
        assert chosen.name == expected, (plain_score, chosen.table)  # a tie (0.5) goes to the plain network
        assert chosen.model is models[expected] and chosen.adapted == (expected != "plain")
        assert set(chosen.table) == set(models)
    assert "<- chosen" in chosen.report() and "(plain)" in chosen.report()


def test_the_selection_refuses_candidates_without_the_plain_network(data):
    x, y, x_val, y_val, x_target = data
    with pytest.raises(ValueError, match="must include the plain network.*'plain'"):
        select_without_labels({"dann": _dann()}, x_val, y_val, x_target)


def test_the_selection_tables_every_validator_asked_for(data):
    x, y, x_val, y_val, x_target = data
    chosen = select_without_labels(_candidates(), x_val, y_val, x_target, also=("dev", "im", "source_accuracy"))
    assert chosen.validator == DEFAULT_CHOICE == "source_accuracy"
    assert all(set(row) == {"source_accuracy", "dev", "im"} for row in chosen.table.values())
    by_rule = select_without_labels(_candidates(), x_val, y_val, x_target, validator_name="gated_mixval", also=("im",))
    assert by_rule.validator == "gated_mixval"
    assert all(set(row) == {"source_accuracy", "gated", "gated_mixval", "im"} for row in by_rule.table.values())
    by_one = select_without_labels(_candidates(), x_val, y_val, x_target, validator_name="im", also=("dev",))
    assert by_one.validator == "im" and all(set(row) == {"im", "dev"} for row in by_one.table.values())


def test_the_selection_refuses_a_list_of_candidates(data):
    x, y, x_val, y_val, x_target = data
    with pytest.raises(ValueError, match=r"candidates must be a dict \{name: trained model\}.*got a list"):
        select_without_labels([_dann(plain=True), _dann()], x_val, y_val, x_target)


def test_a_tie_between_adapted_candidates_goes_to_the_name_that_sorts_first_whatever_the_order(data):
    x, y, x_val, y_val, x_target = data
    models = _candidates()
    by_model = {id(models["plain"]): 0.1, id(models["dann@1"]): 0.5, id(models["dann@3"]): 0.5}
    for names in (["plain", "dann@1", "dann@3"], ["dann@3", "plain", "dann@1"]):
        ordered = {n: models[n] for n in names}
        chosen = select_without_labels(ordered, x_val, y_val, x_target, validator_name=_Fixed(by_model))
        assert chosen.name == "dann@1", names


# Slow: twelve fits of the demo's methods (1000 steps each), the README command's
# longest test (65 s of its 12 min 47 s for tests/adaptation, cli and serving on a
# loaded 2-core VM); CI's steps 2b (slow) and 2c (claims) still run it.
@pytest.mark.slow
@pytest.mark.claims
def test_on_blobs_with_label_shift_the_default_choice_is_not_dann():
    """Blobs' target holds its classes in other proportions, so DANN, which
    aligns the domains' features as a whole, is built to lose there
    (docs/demo.md). With the demo's methods (`demo.method_runs`, 1000 steps),
    600 held-out source points drawn afresh and the unlabeled target, the
    default validator (held-out source accuracy) chose the plain network on
    seeds 0-2 on an AMD EPYC, both with AVX-512 and under
    ONEDNN_MAX_CPU_ISA=AVX2: DANN scored 0.9983 / 0.9983 / 0.9983 against
    the plain network's 1.0 / 0.9983 / 0.9983 (AVX-512), 0.9967 against
    1.0 / 0.9983 / 0.9983 (AVX2); a tie goes to the plain network. DEV chose
    DANN on seed 2 under AVX2, one reason it is not the default."""
    from grad_reverse.demo import label_free, method_runs, problems

    for seed in (0, 1, 2):
        problem, held_out = problems.blobs(seed), problems.blobs(seed + label_free.HELD_OUT_SEED)
        candidates = {}
        for method in ("plain", "dann", "cdan", "cdan_e"):
            model = method_runs.build(method, problem, seed)
            model.fit(
                problem.x_source,
                problem.y_source,
                target=problem.x_target,
                batch_size=method_runs.BATCH_SIZE,
                steps_per_epoch=method_runs.STEPS,
                seed=seed,
                verbose=0,
            )
            candidates[method] = model
        choice = select_without_labels(candidates, held_out.x_source, held_out.y_source, problem.x_target)
        assert choice.name != "dann", (seed, choice.report())


@pytest.mark.claims
def test_docs_dann_md_example_claims_hold():
    """docs/dann.md's `select_without_labels` example, run as written up to its
    choice: dann@6's held-out source accuracy is far below the others' (0.657
    against 0.897 and 0.903 on an AMD EPYC, both with AVX-512 and under
    ONEDNN_MAX_CPU_ISA=AVX2: about 72 of 300 points apart), so neither the
    default nor the rule chooses it, the rule's gate refuses it and the
    ensemble leaves it out (the example then teaches a Student from it). Which of
    plain and dann@1 wins is not claimed: they are 2 of 300 points apart.
    Keras 3 only: under TensorFlow 2.15's Keras 2 the same code trains other
    models (dann@6 scored 0.893 there, and the default chose dann@1), and the
    manual's comment states Keras 3's numbers."""
    from pathlib import Path

    if not KERAS_3:
        pytest.skip("docs/dann.md's example claims Keras 3's numbers (Keras 2 trains other models)")

    text = (Path(__file__).resolve().parents[2] / "docs" / "dann.md").read_text()
    start = text.index(
        "```python\nimport keras\nimport grad_reverse\nfrom grad_reverse.adaptation import ValidatorCallback"
    )
    code = text[start + len("```python\n") : text.index("# A checkpoint, chosen by Keras", start)]
    namespace: dict = {}
    exec(compile(code, "docs/dann.md", "exec"), namespace)  # noqa: S102 (the manual's own code)
    choice, rule_choice = namespace["choice"], namespace["rule_choice"]
    accuracy = {n: row["source_accuracy"] for n, row in choice.table.items()}
    assert accuracy["dann@6"] < min(accuracy["plain"], accuracy["dann@1"]) - 0.1, choice.report()
    assert choice.name in ("plain", "dann@1"), choice.report()
    assert rule_choice.table["dann@6"]["gated"] == 0.0, rule_choice.report()
    assert rule_choice.name in ("plain", "dann@1"), rule_choice.report()
    # The ensemble holds what the same gate keeps: plain and dann@1, not dann@6.
    assert choice.ensemble_members == ["plain", "dann@1"], choice.ensemble_report()
    assert namespace["ensemble_probabilities"].shape == (len(namespace["problem"].x_target), 1)
