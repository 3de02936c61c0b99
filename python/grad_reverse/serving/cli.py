"""The serving subcommands, `check-serving` and `make-servable`.

Defining them needs only argparse: the package CLI registers them without
importing TensorFlow, and each command imports what it needs when it runs.
Each also checks its paths first (`preflight`), which the package CLI runs
before it loads TensorFlow, so a mistyped path is reported at once.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grad_reverse.serving.constants import (
    EXIT_ERROR,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNVERIFIED,
    SAVED_MODEL_FILES,
    SERVING_TAG,
)


def _path_problem(path: str) -> str | None:
    """What `saved_model_dir.saved_model_file` would say of a SavedModel path that is not a
    directory or holds no saved_model.pb(txt), found without importing TensorFlow; None otherwise
    (whether the file parses is checked when the command runs)."""
    if not Path(path).exists():
        return f"{path}: no such directory"
    if not Path(path).is_dir():
        return f"{path}: not a directory (a SavedModel is a directory)"
    for name in SAVED_MODEL_FILES:  # as the loader looks: the binary one first
        if (Path(path) / name).is_file():
            return None
        if (Path(path) / name).exists():
            return f"{path}: {name} is not a regular file (a directory?)"
    binary, text = SAVED_MODEL_FILES
    return f"{path}: not a SavedModel directory: it has no {binary} (or {text})"


def _preflight_check_serving(args: argparse.Namespace) -> int | None:
    problem = _path_problem(args.path)
    if problem:
        print(f"check-serving: error: {problem}", file=sys.stderr)
        return EXIT_ERROR
    return None


def _preflight_make_servable(args: argparse.Namespace) -> int | None:
    from grad_reverse.serving.destination import destination_problem  # paths only, no TensorFlow

    problem = _path_problem(args.src)
    if not problem:
        overwrite = args.overwrite or args.overwrite_any_directory
        refused = destination_problem(Path(args.src), Path(args.dst), overwrite, args.overwrite_any_directory)
        problem = f"{args.dst}: {refused[1]}" if refused else None
    if problem:
        print(f"make-servable: error: {problem}", file=sys.stderr)
        return EXIT_ERROR
    return None


def _run_check_serving(args: argparse.Namespace) -> int:
    from grad_reverse.serving.check import check_serving

    return check_serving(args.path, tags=args.tags.split(","))


def _run_make_servable(args: argparse.Namespace) -> int:
    from grad_reverse.serving.saved_model_dir import SavedModelError
    from grad_reverse.serving.servable import NotServableError, UnverifiedError, make_servable

    try:
        make_servable(
            args.src,
            args.dst,
            overwrite=args.overwrite,
            overwrite_any_directory=args.overwrite_any_directory,
            verify=args.verify,
            allow_unverified=args.allow_unverified,
        )
    except SavedModelError as error:  # names the path itself
        print(f"make-servable: error: {error.for_cli()}", file=sys.stderr)
        return EXIT_ERROR
    except UnverifiedError as error:
        print(f"make-servable: UNVERIFIED: {error}", file=sys.stderr)
        return EXIT_UNVERIFIED
    except NotServableError as error:
        print(f"make-servable: FAIL: {error}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as error:  # disk full, permissions: one line, not a traceback
        print(f"make-servable: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def add_cli(subparsers: Any) -> None:
    """Registers `check-serving PATH` and `make-servable SRC DST` on an argparse subparsers object.

    Args:
      subparsers: what `argparse.ArgumentParser.add_subparsers()` returned.
    """
    check = subparsers.add_parser(
        "check-serving",
        help="list the op types of a SavedModel's serving signatures; fail on non-stock ones",
        description=(
            "Lists the op types each signature of the SavedModel runs (following called "
            "functions) and exits 1, naming them, if any is not registered by TensorFlow "
            "alone, as stock TensorFlow Serving would reject it. Exit 0 when all are stock, "
            "2 on errors (not a SavedModel, no such tag set)."
        ),
    )
    check.add_argument("path", metavar="PATH", help="SavedModel directory")
    check.add_argument(
        "--tags",
        default=SERVING_TAG,
        help=f"comma-separated tag set of the MetaGraph to check (default: {SERVING_TAG})",
    )
    check.set_defaults(run=_run_check_serving, preflight=_preflight_check_serving)

    make = subparsers.add_parser(
        "make-servable",
        help="copy a SavedModel with GradReverse replaced by Identity, so stock TF Serving can serve it",
        description=(
            "Copies the SavedModel SRC to DST with every GradReverse node replaced by Identity "
            "(and GradReverseGrad by stock ops computing -lambda*dy), in the graph and in every "
            "function. Then checks DST for stock ops only, and runs every signature of every "
            f"MetaGraph whose tags include '{SERVING_TAG}' on SRC (with the op library) and DST (in a process "
            "without it) on the same generated inputs, requiring bitwise-equal outputs; DST is "
            "written only if all pass. SRC is never written. Hidden copies that killed runs for "
            "the same DST left beside it are removed. DST is for inference: it no longer "
            f"reverses gradients. Exit {EXIT_OK}: DST written, every signature run and equal "
            f"(or --allow-unverified/--no-verify given); {EXIT_FAILED}: check or verification "
            f"failed; {EXIT_ERROR}: bad SRC or DST; {EXIT_UNVERIFIED}: some signature could not "
            "be run (inputs it cannot generate, such as strings), so DST was not written."
        ),
    )
    make.add_argument("src", metavar="SRC", help="SavedModel directory to read")
    make.add_argument("dst", metavar="DST", help="directory to write (must not exist, unless --overwrite)")
    make.add_argument(
        "--overwrite",
        action="store_true",
        help="replace DST if it is a SavedModel (an earlier copy) or an empty directory; any other directory is refused",
    )
    make.add_argument(
        "--overwrite-any-directory",
        action="store_true",
        help="replace DST whatever directory it is, deleting every file in it",
    )
    make.add_argument(
        "--no-verify",
        dest="verify",
        action="store_false",
        help="skip running the signatures (for very large models); the stock-op check still runs",
    )
    make.add_argument(
        "--allow-unverified",
        action="store_true",
        help="write DST even if some signature could not be run (the last line names them); "
        f"without it such a run exits {EXIT_UNVERIFIED}",
    )
    make.set_defaults(run=_run_make_servable, preflight=_preflight_make_servable)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one serving command in this process, as `python -m grad_reverse
    COMMAND ...` would once the package is loaded (`argv` without the program
    name); returns the exit status.

    Args:
      argv: the command and its arguments (default: `sys.argv[1:]`).
    """
    parser = argparse.ArgumentParser(prog="python -m grad_reverse")
    add_cli(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    args = parser.parse_args(argv)
    refused = args.preflight(args)
    return refused if refused is not None else args.run(args)
