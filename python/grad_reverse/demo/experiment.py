"""The whole moons experiment: train both networks for each seed, report,
plot, export the DANN for serving and check the export, write results.json."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from grad_reverse.demo import DEFAULT_OUT, DEFAULT_SEEDS, DEFAULT_STEPS, label_free
from grad_reverse.demo.data import MOON_NOISE, POINTS_PER_MOON, ROTATION_DEGREES, make_domains
from grad_reverse.demo.export_and_check import export_and_check
from grad_reverse.demo.models import HIDDEN_UNITS, accuracy
from grad_reverse.demo.plot import PLOT_NAME, plot_decision_boundaries
from grad_reverse.demo.training import (
    BATCH_PER_DOMAIN,
    EMA_MOMENTUM,
    GAMMA,
    LAMBDA_MAX,
    LEARNING_RATE,
    train_dann,
    train_plain,
)

EXPORT_NAME = "dann_saved_model"
RESULTS_NAME = "results.json"


def describe_setup(steps: int) -> dict[str, str]:
    """The experiment in words, for the report and results.json."""
    return {
        "source": f"two moons, {POINTS_PER_MOON} labeled points each, noise {MOON_NOISE}",
        "target": f"{2 * POINTS_PER_MOON} unlabeled points, same distribution rotated {ROTATION_DEGREES:g} deg",
        "network": f"one hidden layer of {HIDDEN_UNITS} sigmoid units; DANN (grad_reverse.DANN) domain head: "
        "logistic unit after GradReverse",
        "lambda": f"paper schedule lambda_p = {LAMBDA_MAX:g} * (2 / (1 + exp(-{GAMMA:g} p)) - 1), computed each step",
        "training": f"Adam lr {LEARNING_RATE} keeping EMA weights ({EMA_MOMENTUM}), {steps} steps; batches: "
        f"all {2 * POINTS_PER_MOON} source points (the plain network), "
        f"{BATCH_PER_DOMAIN} source + {BATCH_PER_DOMAIN} target points (DANN)",
    }


def panel_title(name: str, seed: int, target_accuracy: float) -> str:
    """A plot panel's title, its accuracy written as the console writes it
    (three places: 0.997 is not "1.00")."""
    return f"{name}, seed {seed}: target accuracy {target_accuracy:.3f}"


def run(
    out_dir: str = DEFAULT_OUT,
    seeds: Sequence[int] = DEFAULT_SEEDS,
    steps: int = DEFAULT_STEPS,
    quiet: bool = False,
    loading_seconds: float | None = None,
) -> dict[str, Any]:
    """Trains the plain network and DANN for each seed; plots, exports and checks the first.

    `loading_seconds` (the command line's TensorFlow import) is added to the
    final "Done in" line, so that it accounts for the whole wait.

    The same seed gives the same numbers on the same machine and TensorFlow
    build (data, initialization and batch order all follow it); other CPUs
    may differ in the last bits of the arithmetic, and so in the end.

    Args:
      out_dir: where the PNG, the SavedModel and `results.json` go (created).
      seeds: one experiment per seed (data, initialization, shuffling).
      steps: training steps of each model.
      quiet: no progress or report lines (a failing serving check still
        prints its report, on stderr). Otherwise progress is Keras' bar on a terminal and
        short lines when stdout is a file or a pipe.

    Returns a dict: `runs` (per seed: source and target accuracy of
    `plain` and `dann`), `mean_target`, `out_dir` (absolute), `plot`
    (path, or None without matplotlib), `export` (SavedModel path),
    `serving_check` (the exit code of `grad_reverse.serving.check_serving`
    on it), `results` (JSON path), `seconds`, `setup`, `steps`.
    """
    if not seeds:
        raise ValueError("run() needs at least one seed")
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    say: Callable[..., None] = (lambda *a, **k: None) if quiet else print_now
    start = time.perf_counter()
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)

    setup = describe_setup(steps)
    say("Inter-twinning moons (Ganin et al., JMLR 2016, §5.1.1)")
    for key, value in setup.items():
        say(f"  {key + ':':10s} {value}")

    runs = []
    first_models = first_domains = None
    for seed in seeds:
        domains = make_domains(seed)
        say(f"\n[seed {seed}] plain network")
        plain = train_plain(domains, seed, steps, quiet)
        say(f"[seed {seed}] DANN (GradReverse, lambda schedule up to {LAMBDA_MAX:g})")
        dann = train_dann(domains, seed, steps, quiet)
        row = {"seed": int(seed)}
        held_out = make_domains(seed + label_free.HELD_OUT_SEED)  # its source: points no model saw
        for name, model in (("plain", plain), ("dann", dann)):
            row[name] = {
                "source": accuracy(model, domains.x_source, domains.y_source),
                "target": accuracy(model, domains.x_target, domains.y_target),
            }
        chosen = label_free.selection(
            {"plain": plain, "dann": dann}, held_out.x_source, held_out.y_source, domains.x_target, seed
        )
        row["label_free_pick"] = chosen.name
        row["label_free_ensemble"] = accuracy(chosen.ensemble, domains.x_target, domains.y_target)
        runs.append(row)
        say(
            f"[seed {seed}] accuracy      source  target\n"
            f"  plain                 {row['plain']['source']:.3f}   {row['plain']['target']:.3f}\n"
            f"  DANN                  {row['dann']['source']:.3f}   {row['dann']['target']:.3f}"
        )
        if first_models is None:
            first_models, first_domains = (plain, dann), domains

    mean_target = {name: float(np.mean([r[name]["target"] for r in runs])) for name in ("plain", "dann")}
    say(
        f"\nTarget accuracy, mean over seeds {list(seeds)}: plain {mean_target['plain']:.3f}, "
        f"DANN {mean_target['dann']:.3f} ({mean_target['dann'] - mean_target['plain']:+.3f})"
    )
    names = ("plain", "dann")
    say(
        "\n"
        + label_free.summary(
            [r["label_free_pick"] for r in runs],
            {n: [r[n]["target"] for r in runs] for n in names},
            [r["seed"] for r in runs],
            [r["label_free_ensemble"] for r in runs],
        )
    )

    plain, dann = first_models
    first = runs[0]
    plot = plot_decision_boundaries(
        os.path.join(out_dir, PLOT_NAME),
        first_domains,
        [
            (panel_title("plain", first["seed"], first["plain"]["target"]), plain),
            (panel_title("DANN", first["seed"], first["dann"]["target"]), dann),
        ],
    )
    if plot is None:
        say("\nmatplotlib is not installed: no plot (pip install 'grad-reverse[bench]' adds it)")

    export = os.path.join(out_dir, EXPORT_NAME)
    say(f"\nExporting the DANN model of seed {seeds[0]} for serving (its label path: no GradReverse op)")
    serving_check = export_and_check(dann, export, quiet, say)

    results_path = os.path.join(out_dir, RESULTS_NAME)
    result = {
        "setup": setup,
        "steps": steps,
        "runs": runs,
        "mean_target": mean_target,
        "out_dir": out_dir,
        "plot": plot,
        "export": export,
        "serving_check": serving_check,
        "results": results_path,
        "seconds": round(time.perf_counter() - start, 1),
    }
    with open(results_path, "w") as f:
        json.dump(result, f, indent=2)

    say_written(
        say,
        [PLOT_NAME if plot else "(no plot: matplotlib is not installed)"],
        EXPORT_NAME,
        serving_check,
        result["seconds"],
        loading_seconds,
    )
    return result


def say_written(
    say: Callable[..., None],
    pictures: Sequence[str],
    export_name: str,
    serving_check: int,
    seconds: float,
    loading_seconds: float | None,
) -> None:
    """The report's last lines (both demo paths): how long it took, what it wrote. The command
    then prints the output folder's path (`cli`), after any claim that failed."""
    check = "OK" if serving_check == 0 else f"FAILED, exit code {serving_check}"
    loading = f", after {loading_seconds:.0f} s loading TensorFlow" if loading_seconds else ""
    say(f"\nDone in {seconds:.0f} s{loading}. Written to the folder on the last line:")
    for picture in pictures:
        say(f"  {picture}")
    say(f"  {export_name}{os.sep}  (serving check: {check})")
    say(f"  {RESULTS_NAME}")


def print_now(*args: Any) -> None:
    # Flushed: a pipe is block-buffered, and the report lines should keep
    # their place among the serving check's output and TensorFlow's own.
    print(*args, flush=True)
