"""`python -m grad_reverse demo --problem P --methods M ...`: the methods of
`demo.method_runs` (or, on fashion-mnist-m, `demo.image_runs`) side by side
over seeds. Trains them (`method_runs.run`, `image_runs.run`), prints the
table, draws the first seed's decision boundaries (or, for images, samples
of both domains) and every seed's target accuracy, exports the first seed's
first adaptation method for serving and checks the export, writes results.json."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from grad_reverse.demo import method_runs, problems
from grad_reverse.demo.experiment import RESULTS_NAME, panel_title, print_now, say_written
from grad_reverse.demo.export_and_check import export_and_check
from grad_reverse.demo.plot import plot_decision_boundaries
from grad_reverse.demo.plot_accuracy import ACCURACY_PLOT_NAME, METHOD_LABELS, plot_target_accuracy
from grad_reverse.demo.problems import IMAGE_PROBLEMS, TITLES

BOUNDARIES_PLOT_NAME = "{problem}_methods_decision_boundaries.png"
SAMPLES_PLOT_NAME = "{problem}_samples.png"
EXPORT_NAME = "{method}_saved_model"


def export_method(methods: Sequence[str]) -> str:
    """The method whose first-seed model is exported: the first adaptation
    method asked for (what the demo is about), else the first method."""
    return next((m for m in methods if m in method_runs.ADAPTATION_METHODS), methods[0])


def run_methods(
    out_dir: str,
    problem: str,
    methods: Sequence[str],
    seeds: Sequence[int],
    steps: int,
    quiet: bool = False,
    loading_seconds: float | None = None,
    data: Any = None,
) -> dict[str, Any]:
    """Trains `methods` on `problem` for each seed; plots, exports and checks the first seed's.

    Returns `method_runs.run`'s result (`accuracy`: method -> one target accuracy
    per seed, `fit_seconds`) with `mean_target`, `out_dir` (absolute),
    `plots` (name -> path, or None without matplotlib), `export` (the
    SavedModel's path), `export_method`, `serving_check` (the exit code of
    `check_serving` on it), `results` (JSON path) and `seconds` added. On an
    image problem (`data`: its images, as `image_runs.run` takes them) the
    result is `image_runs.run`'s, with `source_accuracy` and `gap_closed` too.
    """
    if not seeds or not methods:
        raise ValueError("run_methods() needs at least one seed and one method")
    say: Callable[..., None] = (lambda *a, **k: None) if quiet else print_now
    start = time.perf_counter()
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    say(TITLES[problem])
    images = problem in IMAGE_PROBLEMS
    if images:
        from grad_reverse.demo import image_runs
    batch = image_runs.BATCH_SIZE if images else method_runs.BATCH_SIZE
    say(
        f"  methods: {' '.join(methods)}; seeds {' '.join(map(str, seeds))}; {steps} steps each "
        f"(batches of {batch} source + target {'images' if images else 'points'})"
    )

    # The first seed's problem and models: drawn and exported below.
    first: dict = {"models": {}, "problem": None}

    def keep(seed: int, method: str, model: Any, data: Any) -> None:
        if seed == seeds[0]:
            first["models"][method] = model
            first["problem"] = data

    seeds = [int(s) for s in seeds]
    if images:
        result = image_runs.run(list(methods), seeds, steps, data=data, quiet=quiet, trained=keep)
        result["gap_closed"] = image_runs.gap_closed(result)
        say("\n" + image_runs.table(result))
    else:
        result = method_runs.run(problem, list(methods), seeds, steps, quiet, trained=keep)
        say("\n" + method_runs.table(result))
        expected = problems.expectation(problem, list(methods))
        if expected:
            say(expected)
    result["mean_target"] = {m: float(np.mean(v)) for m, v in result["accuracy"].items()}

    result["plots"] = plots = {}
    if images:
        from grad_reverse.demo.plot_images import plot_domain_samples

        plots["samples"] = plot_domain_samples(
            os.path.join(out_dir, SAMPLES_PLOT_NAME.format(problem=problem)), first["problem"], title=TITLES[problem]
        )
    elif first["problem"].x_source.shape[1] == 2:  # decision regions need a plane
        panels = [
            (panel_title(METHOD_LABELS.get(m, m), seeds[0], result["accuracy"][m][0]), first["models"][m])
            for m in methods
        ]
        plots["decision_boundaries"] = plot_decision_boundaries(
            os.path.join(out_dir, BOUNDARIES_PLOT_NAME.format(problem=problem)),
            first["problem"],
            panels,
            title=TITLES[problem],
            mark_misclassified=True,
        )
    plots["target_accuracy"] = plot_target_accuracy(
        os.path.join(out_dir, ACCURACY_PLOT_NAME.format(problem=problem)), result
    )
    if None in plots.values():
        say("\nmatplotlib is not installed: no pictures (pip install 'grad-reverse[bench]' adds it)")

    method = result["export_method"] = export_method(methods)
    export = result["export"] = os.path.join(out_dir, EXPORT_NAME.format(method=method))
    say(
        f"\nExporting the {METHOD_LABELS.get(method, method)} model of seed {seeds[0]} for serving "
        "(its label path: no GradReverse op)"
    )
    result["serving_check"] = serving_check = export_and_check(first["models"][method], export, quiet, say)

    result.update(
        out_dir=out_dir, results=os.path.join(out_dir, RESULTS_NAME), seconds=round(time.perf_counter() - start, 1)
    )
    with open(result["results"], "w") as f:
        json.dump(result, f, indent=2)

    say_written(
        say,
        [os.path.basename(path) for path in plots.values() if path],
        os.path.basename(export),
        serving_check,
        result["seconds"],
        loading_seconds,
    )
    return result
