"""The `demo` command of `python -m grad_reverse`. Imports no TensorFlow
until the command runs, so `demo --help` answers at once."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from grad_reverse.demo import DEFAULT_OUT, DEFAULT_SEEDS, DEFAULT_STEPS

HELP = "DANN on the inter-twinning moons: accuracies, plot, SavedModel export + serving check"
# Printed before TensorFlow's import, so that the wait has a reason. Measured
# on 2-core VMs, the first run after a fresh install included: 3 to 5 s
# (docs/demo.md; the demo's last line says how long it took on yours).
LOADING_NOTE = "demo: loading TensorFlow (3 to 5 s on a 2-core VM, the first run after the install too)"


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _run(args: argparse.Namespace) -> int:
    from grad_reverse.demo.experiment import run

    result = run(args.out, seeds=args.seeds or DEFAULT_SEEDS, steps=args.steps, quiet=args.quiet,
                 loading_seconds=getattr(args, "loading_seconds", None))
    if result["serving_check"] != 0:
        return result["serving_check"]
    # With the default steps, DANN not beating the plain network means the
    # gradient is not being reversed (or far fewer steps were asked for).
    gain = result["mean_target"]["dann"] - result["mean_target"]["source_only"]
    if gain <= 0:
        few = f" after {args.steps} steps (default {DEFAULT_STEPS})" if args.steps < DEFAULT_STEPS else ""
        print(f"demo: FAIL: DANN's mean target accuracy is not above source-only's ({gain:+.3f}){few}",
              file=sys.stderr)
        return 1
    return 0


def add_cli(subparsers: Any) -> None:
    """Registers the `demo` subcommand on the `python -m grad_reverse` parser."""
    parser = subparsers.add_parser(
        "demo",
        help=HELP,
        description="Reproduces the inter-twinning moons experiment of Ganin et al. (JMLR 2016, "
        "§5.1.1): a source-only network and a DANN with GradReverse, trained with Keras fit. "
        "The same --seed gives the same numbers on the same machine.",
    )
    parser.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                        help=f"output directory (default: ./{DEFAULT_OUT})")
    parser.add_argument("--seed", type=int, action="append", dest="seeds", metavar="N",
                        help="run this seed; repeat for several (default: %s)" % " ".join(map(str, DEFAULT_SEEDS)))
    parser.add_argument("--steps", type=_positive_int, default=DEFAULT_STEPS,
                        help=f"training steps per model (default: {DEFAULT_STEPS})")
    parser.add_argument("--quiet", action="store_true", help="no progress or report lines")
    parser.set_defaults(run=_run, loading_note=LOADING_NOTE)
