"""The `demo` command of `python -m grad_reverse`. Imports no TensorFlow
until the command runs, so `demo --help` answers at once (the modules it
imports, `image_runs` and `method_runs` for their defaults, import it inside
their functions only).

Two paths: without `--methods` on the moons (the default), the moons demo
(`demo.experiment`: the plain network and DANN, the paper's networks, the numbers
docs/demo.md documents); with `--methods`, or another problem, a comparison
of the chosen methods (`demo.methods_experiment`, the models of `demo.method_runs`,
or of `demo.image_runs` for `--problem fashion-mnist-m`, whose data and
photographs are checked before TensorFlow loads: `preflight`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from grad_reverse.demo import DEFAULT_OUT, DEFAULT_SEEDS, DEFAULT_STEPS
from grad_reverse.demo.image_runs import IMAGE_METHODS
from grad_reverse.demo.image_runs import STEPS as IMAGE_STEPS
from grad_reverse.demo.method_runs import METHODS, STEPS
from grad_reverse.demo.problems import CHOICES, CLAIMS, IMAGE_PROBLEMS
from grad_reverse.demo.problems import DEFAULT_SEEDS as PROBLEM_SEEDS

HELP = "DANN on the inter-twinning moons, or methods compared: accuracies, plots, SavedModel export + serving check"
# Printed before TensorFlow's import, so that the wait has a reason. Measured
# on 2-core VMs, the first run after a fresh install included: 3 to 5 s
# (docs/demo.md; the demo's last line says how long it took on yours).
LOADING_NOTE = "demo: loading TensorFlow (3 to 5 s on a 2-core VM, the first run after the install too)"


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def is_moons_demo(args: argparse.Namespace) -> bool:
    """The moons demo (the plain network and DANN, its own networks), not a comparison."""
    return args.problem == "moons" and args.methods is None


# Only the image problem has a ceiling to train: the target's labels' network.
IMAGE_ONLY_METHODS = tuple(m for m in IMAGE_METHODS if m not in METHODS)


def default_steps(args: argparse.Namespace) -> int:
    # Each path keeps the steps its documented numbers were measured with.
    if args.problem in IMAGE_PROBLEMS:
        return IMAGE_STEPS
    return DEFAULT_STEPS if is_moons_demo(args) else STEPS


FORMER_NAMES = {"source_only": "plain"}


def default_methods(args: argparse.Namespace) -> list:
    """The methods asked for, once each in the order asked; all of the problem's without `--methods`."""
    if args.methods:
        return list(dict.fromkeys(args.methods))
    return list(IMAGE_METHODS if args.problem in IMAGE_PROBLEMS else METHODS)


def output_folder(args: argparse.Namespace) -> str:
    """`--out`, else the default folder of this kind of run: the moons demo's
    ./grad_reverse_demo/, a comparison's ./grad_reverse_demo/PROBLEM/, so that
    neither writes over the other's results.json, plots and export."""
    if args.out:
        return args.out
    return DEFAULT_OUT if is_moons_demo(args) else os.path.join(DEFAULT_OUT, args.problem)


def _run_kind(results: dict) -> str:
    """What wrote a results.json, in words: the moons demo or a comparison on a problem."""
    problem = results.get("problem")  # a comparison's results name their problem; the moons demo's do not
    return f"a comparison of methods on {problem}" if problem else "the moons demo (the plain network and DANN)"


def _refuse_other_kind(args: argparse.Namespace) -> str | None:
    """Why the output folder may not be written: it holds another kind of run's
    results (their results.json, plots and export would be mixed with this run's)."""
    folder = output_folder(args)
    try:
        with open(os.path.join(folder, "results.json")) as file:
            earlier = json.load(file)
    except (OSError, ValueError):
        return None  # none yet (or unreadable: nothing to protect that we can name)
    if not isinstance(earlier, dict):
        return None
    this = f"a comparison of methods on {args.problem}" if not is_moons_demo(args) else _run_kind({})
    other = _run_kind(earlier)
    if other == this:
        return None  # a rerun of the same kind replaces its own files
    return (
        f"{folder} holds the results of {other} (results.json); this run is {this} and would mix its "
        "files with those: choose another --out, or delete that folder"
    )


def preflight(args: argparse.Namespace) -> int | None:
    """Checks that need no TensorFlow, answered at once with exit status 2: an output
    folder holding another kind of run, the options that fit only one problem, and the
    image problem's data and photographs. The data it read is kept for the run,
    `args.image_data`, so that the files are read once."""
    refused = _refuse_other_kind(args)
    if refused:
        print(f"demo: {refused}", file=sys.stderr)
        return 2
    if args.problem not in IMAGE_PROBLEMS:
        if args.data is not None:
            print(f"demo: --data is for --problem {IMAGE_PROBLEMS[0]} only (not {args.problem})", file=sys.stderr)
            return 2
        wrong = [m for m in args.methods or () if m in IMAGE_ONLY_METHODS]
        if wrong:
            print(
                f"demo: {', '.join(wrong)} trains on the target's labels, which only --problem "
                f"{IMAGE_PROBLEMS[0]} has; on {args.problem} choose from {', '.join(METHODS)}",
                file=sys.stderr,
            )
            return 2
        return None
    from grad_reverse.demo.fashion_mnist import DataMissing, load
    from grad_reverse.demo.photo_patches import PhotosMissing, check_photographs_available

    try:
        args.image_data = load(args.data)  # a second or two: a damaged file is said now, not after TensorFlow's start
        check_photographs_available()
    except (DataMissing, PhotosMissing, ValueError, OSError) as missing:
        print(f"demo: {missing}", file=sys.stderr)
        return 2
    return None


def default_seeds(args: argparse.Namespace) -> tuple:
    # The moons demo's three; a comparison's per problem (ten on blobs: problems.DEFAULT_SEEDS says why).
    return DEFAULT_SEEDS if is_moons_demo(args) else PROBLEM_SEEDS[args.problem]


def failed_claims(problem: str, mean_target: dict) -> list:
    """The pairs (better, worse) of `problems.CLAIMS[problem]` whose mean target
    accuracies are not in that order (equal is not above); only pairs of methods that ran."""
    return [
        (better, worse)
        for better, worse in CLAIMS.get(problem, ())
        if better in mean_target and worse in mean_target and mean_target[better] <= mean_target[worse]
    ]


def _few_steps(steps: int, default: int) -> str:
    return f" after {steps} steps (default {default})" if steps < default else ""


def _run(args: argparse.Namespace) -> int:
    """Runs the demo; its last line on stdout (unless `--quiet`) is the output folder's absolute path,
    so a script can take it with `tail -n 1`."""
    result, status = _run_and_judge(args)
    if not args.quiet:
        print(result["out_dir"], flush=True)
    return status


def _image_data(args: argparse.Namespace) -> Any:
    """Fashion-MNIST as `preflight` read it (the command line runs it first), or read now from `--data`."""
    if getattr(args, "image_data", None) is None:
        from grad_reverse.demo.fashion_mnist import load

        args.image_data = load(args.data)
    return args.image_data


def _run_and_judge(args: argparse.Namespace) -> tuple:
    """`(result, exit status)`: the serving check's status if it failed, else whether the claims held."""
    steps = args.steps or default_steps(args)
    seeds = args.seeds or list(default_seeds(args))
    loading = getattr(args, "loading_seconds", None)
    if is_moons_demo(args):
        from grad_reverse.demo.experiment import run

        result = run(output_folder(args), seeds=seeds, steps=steps, quiet=args.quiet, loading_seconds=loading)
    else:
        from grad_reverse.demo.methods_experiment import run_methods

        data = {"data": _image_data(args)} if args.problem in IMAGE_PROBLEMS else {}
        result = run_methods(
            output_folder(args),
            args.problem,
            default_methods(args),
            seeds,
            steps,
            quiet=args.quiet,
            loading_seconds=loading,
            **data,
        )
    if result["serving_check"] != 0:
        return result, result["serving_check"]
    mean = result["mean_target"]
    failed = failed_claims(args.problem, mean)
    if not failed:
        return result, 0
    few = _few_steps(steps, default_steps(args))
    if is_moons_demo(args):
        # With the default steps, DANN not beating the plain network means the
        # gradient is not being reversed (or far fewer steps were asked for).
        print(
            f"demo: FAIL: DANN's mean target accuracy is not above the plain network's "
            f"({mean['dann'] - mean['plain']:+.3f}){few}",
            file=sys.stderr,
        )
    else:
        gaps = "; ".join(f"{better} {mean[better]:.3f} not above {worse} {mean[worse]:.3f}" for better, worse in failed)
        print(f"demo: FAIL: mean target accuracy on {args.problem}: {gaps}{few}", file=sys.stderr)
    return result, 1


def add_cli(subparsers: Any) -> None:
    """Registers the `demo` subcommand on the `python -m grad_reverse` parser."""
    parser = subparsers.add_parser(
        "demo",
        help=HELP,
        description="Reproduces the inter-twinning moons experiment of Ganin et al. (JMLR 2016, "
        "§5.1.1): a plain network and a DANN with GradReverse, trained with Keras fit. "
        "With --methods, or another --problem (blobs; fashion-mnist-m: images), compares the chosen "
        "methods instead (the same networks, weights and batches for each; a table over the seeds, "
        "decision boundaries or sample images, target accuracy per seed). The same --seed gives the "
        "same numbers on the same machine.",
    )
    parser.add_argument(
        "--problem",
        default="moons",
        choices=CHOICES,
        help="moons: the paper's; blobs: three classes, a rotated, label-shifted target; fashion-mnist-m: "
        "Fashion-MNIST against its photograph-blended copy, as MNIST-M (needs the system package "
        "dataset-fashion-mnist or Keras' copy, and scikit-learn) (default: moons)",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=IMAGE_METHODS,
        # The baseline was called source_only before it took select_without_labels' name.
        type=lambda method: FORMER_NAMES.get(method, method),
        metavar="METHOD",
        help=f"compare these: {', '.join(METHODS)}, and on fashion-mnist-m {', '.join(IMAGE_ONLY_METHODS)} "
        "(the ceiling); plain is the network trained on the source alone (source_only, its former name, "
        "is accepted) (default: plain and DANN as the moons demo; all of them on another problem)",
    )
    parser.add_argument(
        "--data",
        metavar="DIR",
        help="fashion-mnist-m: the folder with Fashion-MNIST's four IDX files (.gz or not) (default: "
        "/usr/share/datasets/fashion-mnist, then Keras' cache ~/.keras/datasets/fashion-mnist)",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help=f"output directory (default: ./{DEFAULT_OUT} for the moons demo, ./{DEFAULT_OUT}/PROBLEM for a comparison)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        nargs="+",
        action="extend",
        dest="seeds",
        metavar="N",
        help="run these seeds; --seed 0 1 or --seed 0 --seed 1 (default: %s; %s for a "
        "comparison on blobs)" % (" ".join(map(str, DEFAULT_SEEDS)), " ".join(map(str, PROBLEM_SEEDS["blobs"]))),
    )
    parser.add_argument(
        "--steps",
        type=_positive_int,
        metavar="N",
        help=f"training steps per model (default: {DEFAULT_STEPS} for the moons demo, {STEPS} for a comparison, "
        f"{IMAGE_STEPS} on fashion-mnist-m)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress or report lines")
    parser.set_defaults(run=_run, loading_note=LOADING_NOTE, preflight=preflight)
