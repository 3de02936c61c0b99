"""`python -m grad_reverse COMMAND`: the package's command line.

`pip install` also puts it on the PATH as the console script `grad-reverse`
(pyproject.toml, [project.scripts]): `grad-reverse demo` is
`python -m grad_reverse demo`. Usage lines and errors name whichever of the
two the user typed.

The commands are a static table (name, one-line help, module), so the
top-level `--help` lists them all without importing any of them, and so
without TensorFlow. Running a command:

1. unless `--verbose`, set TensorFlow's logging environment (it is read when
   TensorFlow loads, so before any module that imports it);
2. import the command's module and let it register its options,
   `add_cli(subparsers)`, then parse (`COMMAND --help`, a typo and a bad
   value stop here, with the command's own usage: no command's `add_cli`
   imports TensorFlow; each imports it only when it runs),
   and run the command's `preflight(args)` if it sets one: checks that need
   no TensorFlow (a path that does not exist), answered at once;
3. load the package as a user's `import grad_reverse` would (op library,
   gradients), keeping TensorFlow's start-up lines out of the output;
4. run it; `args.verbose` tells it whether `--verbose` was given, before
   or after the command's name.

A user's program that imports `grad_reverse` gets none of this: the library
never changes the process's log settings.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import time
from collections.abc import Sequence
from typing import NamedTuple

from grad_reverse import _startup

PROG = "python -m grad_reverse"
CONSOLE_SCRIPT = "grad-reverse"  # pyproject.toml's [project.scripts] name
DESCRIPTION = "grad-reverse: a native TensorFlow gradient reversal op."
# Hides TensorFlow's C++ INFO and WARNING lines; errors still show. A value
# the user set in the environment wins.
QUIET_TF_CPP_MIN_LOG_LEVEL = "2"


class Command(NamedTuple):
    name: str
    help: str
    module: str  # has `add_cli(subparsers)`, which registers `name`


COMMANDS = (
    Command("info", "versions, library path, compiled-in kernels", "grad_reverse.info"),
    Command("example", "a short forward/backward example", "grad_reverse.example"),
    Command(
        "demo",
        "DANN on the inter-twinning moons, or methods compared: accuracies, plots, SavedModel export + serving check",
        "grad_reverse.demo.cli",
    ),
    Command("bench", "time the native op against tf.custom_gradient and tf.identity", "grad_reverse.bench"),
    Command(
        "check-serving",
        "list the op types of a SavedModel's serving signatures; fail on non-stock ones",
        "grad_reverse.serving",
    ),
    Command(
        "make-servable",
        "copy a SavedModel with GradReverse replaced by Identity, so stock TF Serving can serve it",
        "grad_reverse.serving",
    ),
)
_BY_NAME = {command.name: command for command in COMMANDS}


def program_name(argv0: str) -> str:
    """What the user typed to start us: `grad-reverse` when `argv0` (the
    process's sys.argv[0]) is the console script pip installed, whatever its
    directory, `python -m grad_reverse` otherwise."""
    name = argv0.replace("\\", "/").rsplit("/", 1)[-1]  # either separator: Windows paths too
    for suffix in (".exe", "-script.py"):  # the console script's form on Windows
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return CONSOLE_SCRIPT if name == CONSOLE_SCRIPT else PROG


def _version() -> str:
    import grad_reverse  # already imported: Python imports the package before running this module

    return grad_reverse.__version__


def _parser(prog: str = PROG) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    parser = argparse.ArgumentParser(
        prog=prog,
        description=DESCRIPTION,
        epilog=f"'{prog} COMMAND --help' shows a command's options.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"grad-reverse {_version()}",
        help="print grad-reverse's version and exit",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show everything TensorFlow logs (by default its INFO and WARNING lines are hidden)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    return parser, commands


def table_parser(prog: str = PROG) -> argparse.ArgumentParser:
    """The top-level parser, every command a placeholder from the table: it
    answers `--help` and finds the command, importing nothing."""
    parser, commands = _parser(prog)
    for command in COMMANDS:
        # No options of its own yet: parse_known_args leaves them for the real parser.
        commands.add_parser(command.name, help=command.help, add_help=False)
    return parser


def command_parser(command: Command, prog: str = PROG) -> argparse.ArgumentParser:
    """The parser with `command` registered by its own module (imported here)."""
    parser, commands = _parser(prog)
    module = importlib.import_module(command.module)
    add_cli = getattr(module, "add_cli", None)
    if add_cli is not None:
        add_cli(commands)
    if command.name not in commands.choices:
        registered = ", ".join(commands.choices) or "nothing"
        parser.error(
            f"command '{command.name}' should come from {command.module}, but that module "
            f"registers {registered}: this installation of grad-reverse is incomplete or mixed "
            f"(reinstall it with `pip install .` from one source tree)"
        )
    subparser = commands.choices[command.name]
    parser.command_subparser = subparser  # for errors in the command's own usage
    # `--verbose` after the command too; SUPPRESS keeps a top-level -v. A command
    # with its own --verbose keeps it (ArgumentError).
    with contextlib.suppress(argparse.ArgumentError):
        subparser.add_argument(
            "--verbose", action="store_true", default=argparse.SUPPRESS, help="show everything TensorFlow logs"
        )
    return parser


def _verbose_after_command(rest: Sequence[str]) -> bool:
    # Only the long form: a command may use -v for something of its own.
    words = list(rest)
    return "--verbose" in (words[: words.index("--")] if "--" in words else words)


def configure_tensorflow_environment(verbose: bool) -> None:
    """What TensorFlow reads when it loads: its C++ log level, unless
    `verbose` or the user set one."""
    if not verbose:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", QUIET_TF_CPP_MIN_LOG_LEVEL)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs `python -m grad_reverse ARGV...` (or `grad-reverse ARGV...`);
    returns the exit status. Without `argv`, the process's command line."""
    prog = program_name(sys.argv[0]) if argv is None else PROG
    argv = list(sys.argv[1:] if argv is None else argv)
    found, rest = table_parser(prog).parse_known_args(argv)  # exits on --help and on no command
    command = _BY_NAME[found.command]
    verbose = found.verbose or _verbose_after_command(rest)
    configure_tensorflow_environment(verbose)

    with _startup.tensorflow_start_filtered(enabled=not verbose):
        parser = command_parser(command, prog)  # argparse only: no command imports TensorFlow here
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # the command's usage, not the top level's (argparse's own would show that)
        parser.command_subparser.error(f"unrecognized arguments: {' '.join(unknown)}")
    args.verbose = verbose  # -v before the command counts for the command too
    preflight = getattr(args, "preflight", None)
    if preflight is not None:  # the command's own checks (paths) before TensorFlow loads
        refused = preflight(args)
        if refused is not None:
            return refused
    if getattr(args, "loading_note", None) and not getattr(args, "quiet", False):
        print(args.loading_note, flush=True)  # the import below can take a minute: say why nothing happens
    loading = time.perf_counter()
    with _startup.tensorflow_start_filtered(enabled=not verbose):
        import grad_reverse

        try:
            grad_reverse._load()
        except (ImportError, ValueError) as error:
            # The library missing or built for another TensorFlow, or a bad
            # GRAD_REVERSE_* variable: the message says what to do; a
            # traceback would only bury it.
            print(f"{prog}: {error}", file=sys.stderr)
            return 2
    args.loading_seconds = time.perf_counter() - loading
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
