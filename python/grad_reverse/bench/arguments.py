"""`bench`'s command-line arguments: argparse only, no TensorFlow, so that
`bench --help`, a typo and a bad value are answered before TensorFlow loads
(the run itself is `cli.run`)."""

from __future__ import annotations

import argparse

from grad_reverse.bench.settings import DEFAULT_OUT, DTYPES, LAMBDA_KINDS, SIZES_HELP, parse_sizes


def _sizes_argument(text: str) -> list[int]:
    try:
        return parse_sizes(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _rounds_argument(text: str) -> int:
    try:
        rounds = int(text)
    except ValueError:
        rounds = 0
    if rounds < 1:
        raise argparse.ArgumentTypeError(f"--rounds takes a positive whole number, got {text!r}")
    return rounds


def add_cli(commands: argparse._SubParsersAction) -> None:
    """Registers the `bench` subcommand on an argparse subparsers object."""
    parser = commands.add_parser("bench", help="time the native op against tf.custom_gradient and tf.identity")
    parser.add_argument("--quick", action="store_true", help="three sizes (1K, 1M, 16M) and fewer rounds")
    parser.add_argument("--dtype", default="float32", choices=DTYPES)
    parser.add_argument(
        "--out",
        metavar="DIR",
        default=DEFAULT_OUT,
        help=f"write bench.json and bench.png here (default: ./{DEFAULT_OUT})",
    )
    parser.add_argument("--sizes", type=_sizes_argument, help=SIZES_HELP + "; default 1K,64K,1M,4M,16M,64M")
    parser.add_argument("--rounds", type=_rounds_argument, help="interleaved rounds per case (default 41, --quick 11)")
    parser.add_argument(
        "--lambda",
        dest="lambda_kind",
        choices=("both",) + LAMBDA_KINDS,
        default="both",
        help="time lambda as a tf.Variable, a Python float, or both (default)",
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the backward-allocation measurement")
    parser.add_argument("--no-dann", action="store_true", help="skip the DANN training-step case")
    parser.add_argument(
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="also show TensorFlow's own log lines (the profiler's, for the allocation count)",
    )

    def run_cli(args: argparse.Namespace) -> int:
        from grad_reverse.bench.cli import run  # TensorFlow loads here, once the arguments are checked

        lambdas = LAMBDA_KINDS if args.lambda_kind == "both" else (args.lambda_kind,)
        run(
            args.quick,
            args.dtype,
            args.out,
            sizes=args.sizes,
            rounds=args.rounds,
            memory=not args.no_memory,
            dann=not args.no_dann,
            lambdas=lambdas,
            verbose=getattr(args, "verbose", False),
        )
        return 0

    parser.set_defaults(run=run_cli)
