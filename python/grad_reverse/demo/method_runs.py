"""The plain network, DANN, CDAN, CDAN+E and MDD side by side on one problem over seeds:
the models and training of

    python -m grad_reverse demo --problem blobs --methods plain dann cdan mdd --seed 0 1 2

which prints each method's target accuracy, min / mean / max over the seeds
(`table`), draws them and writes results.json (`demo.methods_experiment`). Every
method trains the same networks from the same initial weights (per seed) on
the same batches, with Adam(0.01) keeping an exponential moving average of
the weights (as the moons demo); `plain` is the DANN with
domain_loss_weight 0 (the label loss alone). Problems: `demo.problems`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

METHODS = ("plain", "dann", "cdan", "cdan_e", "mdd")
ADAPTATION_METHODS = METHODS[1:]  # all but plain
LAMBDA_MAX = {"moons": 6.0, "blobs": 1.0}  # DANN's and CDAN's ramp; MDD keeps TLlib's warm start to 0.1
# The settings the problems' claims and tables were measured at (docs/demo.md): CDAN's term as
# DANN's, the paper's sum (twice CDAN's authors', its default), at which LAMBDA_MAX was chosen, and
# its map's class probabilities detached (the authors' code; the default now differentiates them);
# MDD's lambda TLlib's fixed warm start (its default now ramps over the fit).
CDAN_REDUCTION = "sum_over_domains"
CDAN_MAP_GRADIENT = False
MDD_SCHEDULE = {"lambda_schedule": "warm_start", "gamma": 1.0, "warm_start_steps": 1000}
BATCH_SIZE = 256  # source + target
# A comparison's default steps (`demo --methods`): those of docs/methods.md's table, which
# also says why not the moons demo's 3000.
STEPS = 1000


def _parts(problem: Any, seed: int) -> tuple:
    from grad_reverse._keras import keras

    keras.utils.set_random_seed(seed)
    if problem.name == "moons":  # the paper's shallow network: 15 sigmoid units
        features = keras.Sequential([keras.Input((2,)), keras.layers.Dense(15, activation="sigmoid")])
        width = 15
    else:
        features = keras.Sequential(
            [keras.Input((2,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(16, activation="relu")]
        )
        width = 16
    units, activation = (1, "sigmoid") if problem.classes == 2 else (problem.classes, "softmax")
    label = keras.Sequential([keras.Input((width,)), keras.layers.Dense(units, activation=activation)])
    domain = keras.Sequential([keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1, activation="sigmoid")])
    return features, label, domain


def build(method: str, problem: Any, seed: int) -> Any:
    """The compiled model of `method` for `problem`, its weights drawn from `seed`."""
    from grad_reverse._keras import keras
    from grad_reverse.adaptation import CDAN, DANN, MDD

    features, label, domain = _parts(problem, seed)
    lambda_max = LAMBDA_MAX[problem.name]
    extra: dict = {}
    if method in ("plain", "dann"):
        model = DANN(features, label, domain, lambda_max=lambda_max)
    elif method in ("cdan", "cdan_e"):
        model = CDAN(
            features,
            label,
            domain,
            lambda_max=lambda_max,
            entropy_conditioning=method == "cdan_e",
            map_gradient=CDAN_MAP_GRADIENT,
        )
        extra = {"domain_loss_reduction": CDAN_REDUCTION}
    elif method == "mdd":
        model = MDD(features, label, **MDD_SCHEDULE)
    else:
        raise ValueError(f"demo: unknown method {method!r}; accepted: {METHODS}")
    loss = "binary_crossentropy" if problem.classes == 2 else "sparse_categorical_crossentropy"
    if method == "plain":
        extra = {"domain_loss_weight": 0.0}
    model.compile(keras.optimizers.Adam(0.01, use_ema=True, ema_momentum=0.99), loss, **extra)
    return model


def target_accuracy(model: Any, problem: Any) -> float:
    from grad_reverse.demo.models import predicted_class

    return float(np.mean(predicted_class(model, problem.x_target) == problem.y_target))


def run(
    problem_name: str, methods: list, seeds: list, steps: int, quiet: bool = False, trained: Callable | None = None
) -> dict:
    """Trains each method on each seed. `trained(seed, method, model, problem)`,
    if given, sees every model once it is scored (the demo keeps the first
    seed's to draw and export them)."""
    from grad_reverse.demo import label_free
    from grad_reverse.demo.problems import PROBLEMS

    results: dict = {m: [] for m in methods}
    picks: list = []
    ensembles: list = []
    seconds: dict = {m: 0.0 for m in methods}
    for seed in seeds:
        problem = PROBLEMS[problem_name](seed)
        held_out = PROBLEMS[problem_name](seed + label_free.HELD_OUT_SEED)  # its source: points no model saw
        models: dict = {}
        for method in methods:
            model = build(method, problem, seed)
            start = time.perf_counter()
            model.fit(
                problem.x_source,
                problem.y_source,
                target=problem.x_target,
                batch_size=BATCH_SIZE,
                steps_per_epoch=steps,
                seed=seed,
                verbose=0,
            )
            seconds[method] += time.perf_counter() - start
            results[method].append(target_accuracy(model, problem))
            models[method] = model
            if trained is not None:
                trained(seed, method, model, problem)
            if not quiet:
                print(f"seed {seed} {method:12s} target accuracy {results[method][-1]:.3f}", flush=True)
        if label_free.PLAIN in models:
            chosen = label_free.selection(models, held_out.x_source, held_out.y_source, problem.x_target, seed)
            picks.append(chosen.name)
            ensembles.append(target_accuracy(chosen.ensemble, problem))
    return {
        "problem": problem_name,
        "steps": steps,
        "seeds": seeds,
        "accuracy": results,
        "fit_seconds": seconds,
        "label_free_picks": picks,
        "label_free_ensemble": ensembles,
    }


def table(result: dict) -> str:
    seeds = len(result["seeds"])
    lines = [
        f"{result['problem']}: target accuracy over {seeds} seed{'s' if seeds > 1 else ''}, {result['steps']} steps",
        f"{'method':12s} {'min':>6s} {'mean':>6s} {'max':>6s} {'fit s/seed':>10s}",
    ]
    for method, values in result["accuracy"].items():
        per_seed = result["fit_seconds"][method] / len(values)
        lines.append(f"{method:12s} {min(values):6.3f} {np.mean(values):6.3f} {max(values):6.3f} {per_seed:10.1f}")
    return "\n".join(lines + label_free_lines(result))


def label_free_lines(result: dict) -> list:
    """The default rule's picks under a table (none in a result without them:
    no source-only network among its methods)."""
    from grad_reverse.demo.label_free import summary

    picks = result.get("label_free_picks")
    ensemble = result.get("label_free_ensemble")
    return ["", summary(picks, result["accuracy"], result["seeds"], ensemble)] if picks else []
