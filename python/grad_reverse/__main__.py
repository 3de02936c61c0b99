"""`python -m grad_reverse COMMAND`: the package's command line."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence


def _info(args: argparse.Namespace) -> int:
    from grad_reverse import info

    info.print_info()
    return 0


def _example(args: argparse.Namespace) -> int:
    from grad_reverse import example

    example.run()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m grad_reverse",
        description="grad-reverse: a native TensorFlow gradient reversal op.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("info", help="versions, library path, compiled-in kernels").set_defaults(run=_info)
    commands.add_parser("example", help="a short forward/backward example").set_defaults(run=_example)
    _add_module_commands(commands)
    return parser


def _add_module_commands(commands) -> None:
    """Subcommands whose modules import TensorFlow: imported only to register them."""
    from grad_reverse import bench, demo, serving

    demo.add_cli(commands)
    bench.add_cli(commands)
    serving.add_cli(commands)


def main(argv: Optional[Sequence[str]] = None) -> int:
    # TensorFlow's C++ start-up INFO lines drown a command's output; keep
    # warnings and errors. Set before TensorFlow is imported; a user's setting wins.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
