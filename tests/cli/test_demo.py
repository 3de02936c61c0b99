"""The moons demo: its claims (DANN beats the plain network on the
rotated target, over seeds), its reproducibility, plot, results and
SavedModel export. The moons generator and the DANN lambda schedule are in
test_demo_moons_and_schedule.py, the training's progress lines in
test_demo_progress.py."""

import argparse
import importlib.util
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from grad_reverse._keras import KERAS_3
from grad_reverse.demo import DEFAULT_OUT, DEFAULT_STEPS, cli, data, experiment, models, plot, training
from helpers.models import graph_op_types

# Four seeds of the full demo (3000 steps each). The claims are over the
# seeds' means, with margins that hold on every CPU measured: oneDNN rounds
# differently per CPU, and the adversarial game turns that into different
# training paths (seed 1's DANN: 0.767 to 0.910 over six CPU paths). Seeds
# 0-3, target accuracy (docs/demo.md): plain 0.773 / 0.727 / 0.713 /
# 0.693 (mean 0.727) on every path; DANN 0.997 / 0.823 / 0.850 / 0.870 (mean
# 0.885, AMD EPYC AVX-512), 0.997 / 0.873 / 0.833 / 0.930 (0.908, Intel Xeon
# AVX-512), 0.997 / 0.810 / 0.843 / 0.960 (0.902, the same Xeon under
# ONEDNN_MAX_CPU_ISA=AVX2), 0.993 / 0.910 / 0.837 / 0.923 (0.916, an AMD EPYC
# with AVX2 only emulated by qemu on that Xeon: scripts/emulated_cpu_claims.sh);
# an AMD EPYC AVX2 VM gave 0.997 / 0.767 / 0.823 on seeds 0-2. .ci/run's step
# 2c reruns the `claims` tests with the AVX2 cap.
CLAIM_SEEDS = (0, 1, 2, 3)
HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


# --- the demo's claims and outputs ---------------------------------------------


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    return experiment.run(str(out), seeds=CLAIM_SEEDS, quiet=True)


def mean_target(result, model):
    return float(np.mean([r[model]["target"] for r in result["runs"]]))


@pytest.mark.claims
def test_dann_beats_source_only_on_the_rotated_target_over_seeds(demo_run):
    """Mean DANN - mean plain >= 0.10: measured 0.158 to 0.189 over the
    CPU paths above (0.124 on the AVX2 VM's seeds 0-2, which is >= 0.10 for
    any seed 3 from its plain 0.693 up)."""
    assert [r["seed"] for r in demo_run["runs"]] == list(CLAIM_SEEDS)
    assert mean_target(demo_run, "dann") - mean_target(demo_run, "plain") >= 0.10, demo_run["runs"]


@pytest.mark.claims
def test_dann_target_accuracy_is_high_over_seeds(demo_run):
    """Mean DANN target accuracy >= 0.83: measured 0.885 to 0.916 over the CPU
    paths above. Not 0.85: the AVX2 VM's seeds 0-2 would need its unmeasured
    seed 3 at 0.813 or more for that, 0.733 for this bound (seed 3 gave 0.870
    to 0.960 elsewhere, but that VM's seed 1 fell below all of 20 seeds on
    the development machine). Without a working reversal DANN's mean is
    near the plain network's 0.727."""
    assert mean_target(demo_run, "dann") >= 0.83, demo_run["runs"]


@pytest.mark.claims
def test_the_earlier_objective_still_gives_the_earlier_demos_target_accuracy_over_seeds_0_to_2(demo_run):
    """`domain_loss_reduction="mean_over_batch"` trains the objective the demo
    used before the paper's became the default. Its DANN's mean target
    accuracy over seeds 0-2 is at least 0.88 (measured 0.955 on the AMD
    AVX-512 VM, 0.968 on the Intel Xeon, 0.969 under its AVX2 cap, 0.914 on
    an emulated AVX2-only EPYC, where seed 1 gave 0.823: a bound of 0.92
    failed there), plain's at most 0.80 (0.738 on every CPU path)."""
    earlier = []
    for seed in (0, 1, 2):
        domains = data.make_domains(seed)
        model = training.train_dann(domains, seed, DEFAULT_STEPS, domain_loss_reduction="mean_over_batch")
        earlier.append(models.accuracy(model, domains.x_target, domains.y_target))
    plain = [r["plain"]["target"] for r in demo_run["runs"] if r["seed"] in (0, 1, 2)]
    assert np.mean(earlier) >= 0.88 and np.mean(plain) <= 0.80, (earlier, plain)


@pytest.mark.claims
def test_both_networks_fit_the_labeled_source(demo_run):
    """Mean source accuracy >= 0.98 for both networks (1.000 on every seed and CPU path measured)."""
    for name in ("plain", "dann"):
        assert np.mean([r[name]["source"] for r in demo_run["runs"]]) >= 0.98, demo_run["runs"]


def test_run_writes_the_plot_and_results(demo_run):
    if HAS_MATPLOTLIB:
        with open(demo_run["plot"], "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    else:
        assert demo_run["plot"] is None
    with open(demo_run["results"]) as f:
        saved = json.load(f)
    assert saved["runs"] == demo_run["runs"] and saved["export"] == demo_run["export"]


def test_export_serves_the_trained_dann_without_the_op(demo_run):
    loaded = tf.saved_model.load(demo_run["export"])
    serve = loaded.signatures["serving_default"]
    assert "GradReverse" not in graph_op_types(serve)
    domains = data.make_domains(CLAIM_SEEDS[0])
    (label,) = serve(tf.constant(domains.x_target)).values()  # the DANN's label path only
    accuracy = float(np.mean((label.numpy().reshape(-1) > 0.5) == (domains.y_target > 0.5)))
    assert accuracy == pytest.approx(demo_run["runs"][0]["dann"]["target"])


def test_check_serving_passes_on_the_demo_export(demo_run):
    assert demo_run["serving_check"] == 0


def test_cli_registers_demo_with_its_options():
    parser = argparse.ArgumentParser()
    cli.add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["demo", "--out", "somewhere", "--seed", "4", "--seed", "7", "--steps", "10"])
    assert (args.out, args.seeds, args.steps, args.quiet) == ("somewhere", [4, 7], 10, False)
    assert callable(args.run)
    defaults = parser.parse_args(["demo"])
    # No --steps: the moons demo's default (a comparison has its own: tests/cli/test_demo_methods.py).
    assert (defaults.out, defaults.seeds, defaults.steps) == (None, None, None)
    assert cli.output_folder(defaults) == DEFAULT_OUT
    assert cli.default_steps(defaults) == DEFAULT_STEPS
    with pytest.raises(SystemExit):
        parser.parse_args(["demo", "--steps", "0"])


@pytest.mark.parametrize(
    "gain, serving_check, status", [(0.2, 0, 0), (0.0, 0, 1), (-0.1, 0, 1), (0.2, 1, 1), (0.2, 2, 2)]
)
def test_demo_command_exit_status_says_whether_dann_won_and_the_export_serves(
    monkeypatch, capsys, gain, serving_check, status
):
    def fake_run(out, seeds, steps, quiet, loading_seconds=None):
        return {"serving_check": serving_check, "mean_target": {"dann": 0.7 + gain, "plain": 0.7}}

    monkeypatch.setattr(experiment, "run", fake_run)
    args = argparse.Namespace(out="x", seeds=[0], steps=DEFAULT_STEPS, quiet=True, problem="moons", methods=None)
    assert cli._run(args) == status
    assert ("DANN's mean target accuracy is not above" in capsys.readouterr().err) == (
        serving_check == 0 and status == 1
    )


@pytest.mark.parametrize(
    "problem, methods, gain", [("moons", None, 0.2), ("moons", None, -0.1), ("blobs", ["dann"], 0.0)]
)
def test_the_demo_commands_last_line_is_the_output_folders_absolute_path(
    monkeypatch, capsys, tmp_path, problem, methods, gain
):
    out = str(tmp_path / "out")

    def fake_run(out_dir, *args, **kwargs):
        print("the report", flush=True)
        return {
            "serving_check": 0,
            "out_dir": os.path.abspath(out_dir),
            "mean_target": {"dann": 0.7 + gain, "plain": 0.7, "cdan": 0.7},
        }

    from grad_reverse.demo import methods_experiment

    monkeypatch.setattr(experiment, "run", fake_run)
    monkeypatch.setattr(methods_experiment, "run_methods", fake_run)
    monkeypatch.chdir(tmp_path)
    args = argparse.Namespace(out="out", seeds=[0], steps=10, quiet=False, problem=problem, methods=methods)
    cli._run(args)
    assert capsys.readouterr().out.splitlines()[-1] == out
    cli._run(argparse.Namespace(**dict(vars(args), quiet=True)))
    assert capsys.readouterr().out == "the report\n"  # --quiet adds nothing


# --- reproducibility -------------------------------------------------------------

# Few steps keep this quick; the training path is the demo's own.
REPRO_STEPS = 40


def trained_weights(seed):
    domains = data.make_domains(seed)
    plain = training.train_plain(domains, seed, REPRO_STEPS)
    dann = training.train_dann(domains, seed, REPRO_STEPS)
    return [w.copy() for model in (plain, dann) for w in model.get_weights()]


def test_the_same_seed_trains_bitwise_the_same_weights_and_another_seed_does_not():
    first, again, other = trained_weights(5), trained_weights(5), trained_weights(6)
    assert len(first) == len(again)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    assert any(not np.array_equal(a, c) for a, c in zip(first, other))


def test_run_with_the_same_seed_reports_the_same_numbers(tmp_path):
    a = experiment.run(str(tmp_path / "a"), seeds=[3], steps=REPRO_STEPS, quiet=True)
    b = experiment.run(str(tmp_path / "b"), seeds=[3], steps=REPRO_STEPS, quiet=True)
    assert a["runs"] == b["runs"] and a["mean_target"] == b["mean_target"]
    assert a["out_dir"] == os.path.abspath(tmp_path / "a")


def test_plot_titles_write_the_target_accuracy_to_three_places_as_the_console_does(tmp_path, monkeypatch):
    titles = []
    monkeypatch.setattr(
        experiment,
        "plot_decision_boundaries",
        lambda path, domains, panels: titles.extend(title for title, _ in panels),
    )
    result = experiment.run(str(tmp_path), seeds=[3], steps=REPRO_STEPS, quiet=True)
    accuracies = [result["runs"][0][name]["target"] for name in ("plain", "dann")]
    assert len(titles) == 2
    for title, accuracy in zip(titles, accuracies):
        written = title.rsplit(" ", 1)[1]
        assert len(written.split(".")[1]) == 3 and float(written) == round(accuracy, 3), (title, accuracy)
    assert experiment.panel_title("DANN", 0, 0.9966).endswith("target accuracy 0.997")


def saved_weights(export_dir):
    """The exported model's variables (`variables/N`, in the model's order), by name."""
    reader = tf.train.load_checkpoint(os.path.join(export_dir, "variables", "variables"))
    names = [n for n in reader.get_variable_to_shape_map() if n.startswith("variables/")]
    assert names
    return {n: reader.get_tensor(n) for n in names}


@pytest.mark.slow  # trains the demo twice, each in its own process
def test_the_demo_command_twice_with_one_seed_exports_bitwise_the_same_model(tmp_path):
    import subprocess
    import sys

    outputs = []
    for name in ("a", "b"):
        out = tmp_path / name
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "grad_reverse",
                "demo",
                "--seed",
                "3",
                "--steps",
                str(REPRO_STEPS),
                "--quiet",
                "--out",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        with open(out / "results.json") as f:
            saved = json.load(f)
        # Exit 1 exactly when DANN does not beat plain (likely after so few steps).
        gain = saved["mean_target"]["dann"] - saved["mean_target"]["plain"]
        assert result.returncode == (0 if gain > 0 else 1), (gain, result.returncode, result.stderr)
        assert ("demo: FAIL" in result.stderr) == (gain <= 0), result.stderr
        # --quiet: no progress, report or serving-check lines.
        assert result.stdout == "", result.stdout
        outputs.append((saved["runs"], saved_weights(out / "dann_saved_model")))
    (runs_a, weights_a), (runs_b, weights_b) = outputs
    assert runs_a == runs_b
    assert weights_a.keys() == weights_b.keys()
    for name in weights_a:
        np.testing.assert_array_equal(weights_a[name].view(np.uint32), weights_b[name].view(np.uint32), name)


def test_the_demo_command_says_it_is_loading_tensorflow_first_and_counts_that_time(tmp_path):
    import re
    import subprocess
    import sys

    from grad_reverse.demo.cli import LOADING_NOTE

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "grad_reverse",
            "demo",
            "--seed",
            "3",
            "--steps",
            str(REPRO_STEPS),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = result.stdout.splitlines()
    assert lines[0] == LOADING_NOTE, result.stdout[:500]
    done = [line for line in lines if line.startswith("Done in")]
    assert len(done) == 1, result.stdout
    assert re.fullmatch(
        r"Done in \d+ s, after \d+ s loading TensorFlow\. Written to the folder on the last line:", done[0]
    ), done[0]
    assert lines[-1] == str(tmp_path / "out"), lines[-1]


# --- the picture --------------------------------------------------------------------


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_plot_labels_the_axes_and_says_what_the_shading_means():
    domains = data.make_domains(0)
    model = models.build_plain(0)
    fig = plot.decision_boundary_figure(domains, [("a", model), ("b", model)])
    axes = fig.axes
    assert len(axes) == 2
    for ax in axes:
        assert ax.get_xlabel() and ax.get_ylabel()
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    assert sum("shaded" in t and "predicts class" in t for t in texts) == 2, texts
    assert any("decision boundary" in t for t in texts)
    assert sum(t.startswith("source point") for t in texts) == sum(t.startswith("target point") for t in texts) == 2


# --- Keras 2 -------------------------------------------------------------------------

LEGACY_DEMO = """
import json, sys
from grad_reverse._keras import KERAS_3, keras
from grad_reverse.demo.experiment import run

result = run(sys.argv[1], seeds=[0], steps=30, quiet=True)
print(json.dumps({"keras": keras.__version__, "keras_3": KERAS_3, "runs": result["runs"],
                  "serving_check": result["serving_check"], "plot": result["plot"]}))
"""


def keras_2_environment():
    """The environment of a process whose Keras is Keras 2, or None where none can be had:
    TensorFlow 2.15 (tf.keras is Keras 2) as is; 2.16+ with tf-keras and TF_USE_LEGACY_KERAS=1."""
    if not KERAS_3:
        return dict(os.environ)
    if importlib.util.find_spec("tf_keras") is not None:
        return dict(os.environ, TF_USE_LEGACY_KERAS="1")
    return None


def test_demo_runs_under_keras_2(tmp_path):
    import subprocess
    import sys

    env = keras_2_environment()
    if env is None:
        if os.environ.get("GRAD_REVERSE_REQUIRE_LEGACY_KERAS"):
            pytest.fail("GRAD_REVERSE_REQUIRE_LEGACY_KERAS is set but tf-keras is not installed")
        pytest.skip("Keras 3 without tf-keras: no Keras 2 here (CI's legacy step and TensorFlow 2.15 row have one)")
    result = subprocess.run(
        [sys.executable, "-c", LEGACY_DEMO, str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout  # quiet: the script's own line only
    report = json.loads(lines[0])
    assert report["keras_3"] is False and report["keras"].startswith("2."), report
    assert report["serving_check"] == 0
    (row,) = report["runs"]
    assert 0.5 <= row["dann"]["source"] <= 1.0 and 0.5 <= row["plain"]["source"] <= 1.0, row
