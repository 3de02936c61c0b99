"""`python -m grad_reverse demo --problem/--methods`: the comparison of
methods (demo.methods_experiment): its options, exit status, a short run's table,
results, pictures and export, and the pictures' content."""

import argparse
import contextlib
import importlib.util
import io
import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from grad_reverse.demo import (
    DEFAULT_OUT,
    DEFAULT_STEPS,
    cli,
    method_runs,
    methods_experiment,
    plot,
    plot_accuracy,
    problems,
)
from grad_reverse.demo.models import predicted_class
from grad_reverse.demo.problems import CHOICES, IMAGE_PROBLEMS, PROBLEMS

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
PNG = b"\x89PNG\r\n\x1a\n"


def demo_parser():
    parser = argparse.ArgumentParser(prog="demo-test")
    cli.add_cli(parser.add_subparsers(dest="command"))
    return parser


# --- options ---------------------------------------------------------------------


def test_cli_parses_problem_methods_and_seeds_in_either_form():
    args = demo_parser().parse_args(
        ["demo", "--problem", "blobs", "--methods", "dann", "mdd", "--seed", "0", "1", "--seed", "4", "--steps", "5"]
    )
    assert (args.problem, args.methods, args.seeds, args.steps) == ("blobs", ["dann", "mdd"], [0, 1, 4], 5)
    assert not cli.is_moons_demo(args) and cli.default_steps(args) == method_runs.STEPS


def test_no_options_is_the_moons_demo_and_methods_make_it_a_comparison():
    defaults = demo_parser().parse_args(["demo"])
    assert (defaults.problem, defaults.methods, defaults.seeds, defaults.steps) == ("moons", None, None, None)
    assert cli.is_moons_demo(defaults) and cli.default_steps(defaults) == DEFAULT_STEPS
    moons_methods = demo_parser().parse_args(["demo", "--methods", "plain", "dann"])
    # The baseline's former name still works, as the name the selection uses.
    assert demo_parser().parse_args(["demo", "--methods", "source_only", "dann"]).methods == ["plain", "dann"]
    assert not cli.is_moons_demo(moons_methods)
    # Seeds: three for the moons, ten for a comparison on blobs (docs/demo.md says why).
    assert cli.default_seeds(defaults) == cli.default_seeds(moons_methods) == (0, 1, 2)
    assert cli.default_seeds(demo_parser().parse_args(["demo", "--problem", "blobs"])) == tuple(range(10))


@pytest.mark.parametrize(
    "option, value, choices",
    [
        ("--problem", "cubes", "'moons', 'blobs'"),
        ("--methods", "dan", "'plain', 'dann', 'cdan', 'cdan_e', 'mdd'"),
    ],
)
def test_an_unknown_problem_or_method_is_refused_naming_the_choices(capsys, option, value, choices):
    with pytest.raises(SystemExit) as stop:
        demo_parser().parse_args(["demo", option, value])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"invalid choice: '{value}'" in err and choices in err, err


def test_the_comparison_trains_cdan_and_mdd_at_the_scales_its_claims_were_measured_at():
    """docs/demo.md: CDAN's term the DANN paper's sum (not its default, the authors' half of it), MDD's
    lambda TLlib's fixed warm start (not its default ramp over the fit)."""
    problem = PROBLEMS["blobs"](0)
    for method in ("cdan", "cdan_e"):
        assert method_runs.build(method, problem, 0)._domain_loss_reduction == "sum_over_domains"
    mdd = method_runs.build("mdd", problem, 0)
    assert (mdd.lambda_schedule, mdd.gamma, mdd.lambda_max, mdd.warm_start_steps) == ("warm_start", 1.0, 0.1, 1000)


def test_the_problem_choices_are_the_problems():
    parser = demo_parser()
    (demo,) = parser._subparsers._group_actions[0].choices.values()
    (problem,) = [a for a in demo._actions if a.dest == "problem"]
    assert tuple(problem.choices) == tuple(PROBLEMS) + IMAGE_PROBLEMS == CHOICES


# --- exit status -------------------------------------------------------------------


@pytest.mark.parametrize(
    "problem, mean, failed",
    [
        ("moons", {"plain": 0.9, "dann": 0.95, "mdd": 0.91}, []),
        (
            "moons",
            {"plain": 0.9, "dann": 0.85, "cdan": 0.95, "mdd": 0.9},
            [("dann", "plain")],
        ),  # equal is not above; no claim for MDD on the moons
        ("moons", {"dann": 0.5, "cdan": 0.6}, []),  # no plain: nothing to beat
        ("moons", {"plain": 0.9}, []),
        # blobs is built for DANN to lose to the plain network; CDAN must beat both.
        ("blobs", {"plain": 0.8, "dann": 0.78, "cdan": 0.88, "cdan_e": 0.89, "mdd": 0.83}, []),
        (
            "blobs",
            {"plain": 0.8, "dann": 0.9, "cdan": 0.88, "cdan_e": 0.8, "mdd": 0.7},
            [("cdan", "dann"), ("cdan_e", "plain")],
        ),  # no claim for MDD on blobs either: it lost to the plain network on one CPU path
    ],
)
def test_failed_claims_names_the_pairs_out_of_order(problem, mean, failed):
    assert cli.failed_claims(problem, mean) == failed


@pytest.mark.parametrize(
    "mean, serving_check, steps, status, message",
    [
        ({"plain": 0.9, "dann": 0.92, "cdan": 0.95}, 0, None, 0, None),
        ({"plain": 0.9, "dann": 0.85, "cdan": 0.93}, 0, None, 0, None),  # DANN may lose on blobs
        ({"plain": 0.9, "dann": 0.95, "cdan": 0.93}, 0, None, 1, "cdan 0.930 not above dann 0.950"),
        (
            {"plain": 0.9, "dann": 0.95, "cdan": 0.93},
            0,
            30,
            1,
            "cdan 0.930 not above dann 0.950 after 30 steps (default 1000)",
        ),
        ({"plain": 0.9, "dann": 0.95, "cdan": 0.93}, 1, None, 1, None),  # the serving check's status comes first
        ({"plain": 0.9, "dann": 0.95, "cdan": 0.93}, 2, None, 2, None),
    ],
)
def test_comparison_exit_status(monkeypatch, capsys, mean, serving_check, steps, status, message):
    asked = {}

    def fake_run_methods(out, problem, methods, seeds, steps, quiet, loading_seconds=None):
        asked.update(problem=problem, methods=methods, seeds=seeds, steps=steps)
        return {"serving_check": serving_check, "mean_target": mean}

    monkeypatch.setattr(methods_experiment, "run_methods", fake_run_methods)
    argv = ["demo", "--problem", "blobs", "--quiet"] + (["--steps", str(steps)] if steps else [])
    assert cli._run(demo_parser().parse_args(argv)) == status
    # Without --methods on blobs: all methods; seeds (ten on blobs) and steps: the defaults.
    assert asked == {
        "problem": "blobs",
        "methods": list(method_runs.METHODS),
        "seeds": list(range(10)),
        "steps": steps or method_runs.STEPS,
    }
    err = capsys.readouterr().err
    if message is None:
        assert "FAIL" not in err, err
    else:
        assert err.startswith("demo: FAIL: mean target accuracy on blobs: ") and message in err
        assert "plain" not in err, err


# --- a short run ---------------------------------------------------------------------

SHORT = ["--problem", "blobs", "--methods", "plain", "dann", "cdan", "mdd", "--seed", "0", "--steps", "10"]


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("methods")
    args = demo_parser().parse_args(["demo", *SHORT, "--out", str(out)])
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        status = cli._run(args)
    with open(out / "results.json") as f:
        return status, stdout.getvalue(), json.load(f), out


def test_a_short_run_prints_the_table_and_writes_results(short_run):
    status, stdout, saved, out = short_run
    methods = ["plain", "dann", "cdan", "mdd"]
    assert "blobs: target accuracy over 1 seed, 10 steps" in stdout
    table = stdout[stdout.index("method          min   mean    max fit s/seed") :].splitlines()
    assert [line.split()[0] for line in table[1:5]] == methods, stdout
    assert list(saved["accuracy"]) == methods and all(len(v) == 1 for v in saved["accuracy"].values())
    assert saved["mean_target"] == {m: saved["accuracy"][m][0] for m in methods}
    assert status == (1 if cli.failed_claims("blobs", saved["mean_target"]) else 0)
    assert saved["out_dir"] == str(out) and saved["seeds"] == [0] and saved["steps"] == 10


def test_a_short_run_draws_both_pictures(short_run):
    _, stdout, saved, out = short_run
    plots = saved["plots"]
    assert set(plots) == {"decision_boundaries", "target_accuracy"}
    if not HAS_MATPLOTLIB:
        assert set(plots.values()) == {None} and "matplotlib is not installed" in stdout
        return
    for path in plots.values():
        assert os.path.dirname(path) == str(out) and os.path.basename(path) in stdout
        with open(path, "rb") as f:
            assert f.read(8) == PNG


def test_a_short_run_exports_its_first_adaptation_method_and_the_export_serves_it(short_run):
    _, _, saved, out = short_run
    assert saved["export_method"] == "dann" and saved["export"] == str(out / "dann_saved_model")
    assert saved["serving_check"] == 0
    serve = tf.saved_model.load(saved["export"]).signatures["serving_default"]
    problem = PROBLEMS["blobs"](0)
    (scores,) = serve(tf.constant(problem.x_target)).values()
    assert float(np.mean(scores.numpy().argmax(1) == problem.y_target)) == saved["accuracy"]["dann"][0]


def test_the_export_is_the_first_adaptation_method_or_else_the_first():
    assert methods_experiment.export_method(["plain", "mdd", "dann"]) == "mdd"
    assert methods_experiment.export_method(["plain"]) == "plain"


# --- the pictures ------------------------------------------------------------------------


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
@pytest.mark.filterwarnings("ignore:`build\\(\\)` was called on layer")  # Keras: an untrained model's first call
def test_boundaries_of_five_methods_on_three_classes_ring_the_misclassified_target_points():
    problem = PROBLEMS["blobs"](0)
    model = method_runs.build("cdan", problem, 0)  # untrained: it gets many target points wrong
    missed = int(np.sum(predicted_class(model, problem.x_target) != problem.y_target))
    fig = plot.decision_boundary_figure(
        problem, [(str(i), model) for i in range(5)], title="blobs", mark_misclassified=True
    )
    assert len(fig.axes) == 5  # two rows of three, the sixth removed
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    assert sum(t.startswith("shaded") for t in texts) == 3 and any(t.startswith("ringed") for t in texts), texts
    # Each panel: 3 classes x (source, target) point sets, then the ringed points.
    for ax in fig.axes:
        *points, rings = ax.collections[-7:]
        assert len(rings.get_offsets()) == missed > 0
    unringed = plot.decision_boundary_figure(problem, [("a", model)], title="blobs")
    assert not any(t.get_text().startswith("ringed") for t in unringed.legends[0].get_texts())


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_target_accuracy_picture_has_a_dot_per_seed_and_a_line_at_each_mean():
    result = {
        "problem": "blobs",
        "steps": 10,
        "seeds": [0, 1, 2],
        "accuracy": {"plain": [0.9, 0.92, 0.91], "dann": [0.8, 0.95, 0.85]},
    }
    fig = plot_accuracy.target_accuracy_figure(result)
    (ax,) = fig.axes
    dots = [c for c in ax.collections if len(c.get_offsets()) == 3]
    np.testing.assert_allclose([np.asarray(d.get_offsets())[:, 1] for d in dots], list(result["accuracy"].values()))
    means = [c for c in ax.collections if c not in dots]
    np.testing.assert_allclose([np.asarray(m.get_segments())[0, 0, 1] for m in means], [0.91, 13 / 15])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["plain", "DANN"]


def test_without_matplotlib_the_pictures_are_skipped_not_a_crash(monkeypatch, tmp_path):
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.colors"):
        monkeypatch.setitem(sys.modules, name, None)  # makes `import` raise ImportError
    path = str(tmp_path / "a.png")
    assert plot_accuracy.plot_target_accuracy(path, {"accuracy": {}}) is None
    assert plot.plot_decision_boundaries(path, PROBLEMS["blobs"](0), []) is None
    assert not os.path.exists(path)


def test_a_short_run_says_what_the_problem_expects(short_run):
    _, stdout, _, _ = short_run
    # Blobs is built for DANN to lose: the console says so under the table, with what is checked.
    after_table = stdout[stdout.index("method          min   mean    max fit s/seed") :]
    assert "DANN, which aligns the domains' features as a whole, is meant to lose to the plain network" in after_table
    assert "Checked (mean target accuracy; exit status 1 if not): cdan > dann, cdan > plain." in after_table


def test_the_expectation_names_only_the_checks_of_methods_that_ran():
    assert problems.expectation("blobs", ["plain", "mdd"]).splitlines()[1:] == []
    assert "cdan_e > plain" in problems.expectation("moons", ["plain", "cdan_e"])
    assert problems.expectation("fashion-mnist-m", ["dann"]) == ""


def test_a_comparison_writes_to_a_folder_of_its_problem_by_default():
    parse = demo_parser().parse_args
    assert cli.output_folder(parse(["demo"])) == DEFAULT_OUT
    assert cli.output_folder(parse(["demo", "--problem", "blobs"])) == os.path.join(DEFAULT_OUT, "blobs")
    assert cli.output_folder(parse(["demo", "--methods", "dann"])) == os.path.join(DEFAULT_OUT, "moons")
    assert cli.output_folder(parse(["demo", "--problem", "blobs", "--out", "mine"])) == "mine"


def test_an_output_folder_holding_another_kind_of_run_is_refused_before_training(tmp_path, capsys):
    parse = demo_parser().parse_args
    (tmp_path / "results.json").write_text(json.dumps({"setup": {}, "runs": [], "mean_target": {}}))  # the moons demo's
    assert cli.preflight(parse(["demo", "--out", str(tmp_path)])) is None  # a rerun of the same kind
    assert cli.preflight(parse(["demo", "--problem", "blobs", "--out", str(tmp_path)])) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"demo: {tmp_path} holds the results of the moons demo (the plain network and DANN)"), err
    assert "choose another --out, or delete that folder" in err
    (tmp_path / "results.json").write_text(json.dumps({"problem": "blobs", "accuracy": {}}))
    assert cli.preflight(parse(["demo", "--problem", "blobs", "--out", str(tmp_path)])) is None
    assert cli.preflight(parse(["demo", "--out", str(tmp_path)])) == 2
    assert "holds the results of a comparison of methods on blobs" in capsys.readouterr().err
