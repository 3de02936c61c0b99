"""How the command line starts: before TensorFlow, and without its start-up chatter.

Two jobs, both for `python -m grad_reverse` (and the `grad-reverse` script)
only; a user's program that imports `grad_reverse` gets neither:

* `starting_command_line()` tells the package's `__init__` that Python is
  importing it on the way to running the command line, so that the import
  can leave TensorFlow alone until the command line has set its environment
  (and `--help` never loads TensorFlow at all). Python imports a package
  before it runs the package's `__main__`, so the import itself must wait:
  the command line calls the package's `_load()` once it is ready, and any
  public name asked for earlier loads it too (`package_getattr`).
* `tensorflow_start_filtered()` keeps the lines TensorFlow's C++ code writes
  while it loads out of a command's output. Some of them come before
  TensorFlow reads TF_CPP_MIN_LOG_LEVEL (TensorFlow 2.21 logs its oneDNN
  notice through absl before absl's logging is set up), so no environment
  variable can silence them; they are filtered instead.

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any

PACKAGE = "grad_reverse"
SCRIPT_NAMES = ("grad-reverse", "grad-reverse.exe", "grad-reverse-script.py")

# One log record's first line: absl's format (TensorFlow 2.16+),
#   I0000 00:00:1796037021.958378    8469 port.cc:153] message
# or TensorFlow's older own (2.15),
#   2023-08-29 12:35:30.891928: I tensorflow/core/util/port.cc:110] message
_RECORD = re.compile(
    r"^(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: )?(?P<level>[IWEF])(?:\d{4} [\d:.]+\s+\d+)?\s+[\w./-]+:\d+\] "
)
# absl says this once, before the first record, when nothing has set up its logging.
_ABSL_PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
# With the full `tensorflow` wheel on a machine without a usable CUDA driver,
# the CUDA platform's start-up fails with this error, which only says there is no GPU.
_NO_CUDA_DRIVER = "failed call to cuInit"
# Native lines that start something of their own, never a record's
# continuation: Python's -X importtime, fatal errors, C++ aborts.
_NATIVE_LINE_OF_ITS_OWN = re.compile(
    r"^(?:import time:|Fatal Python error|terminate called|Segmentation fault|\*\*\* )"
)


def starting_command_line(argv: Sequence[str] | None = None, orig_argv: Sequence[str] | None = None) -> bool:
    """True while Python imports this package to run its command line.

    `python -m grad_reverse ...`: while Python locates the module to run, it
    has already set `sys.argv[0]` to "-m" (documented under the -m option);
    `sys.orig_argv` (Python 3.10+) tells which module. The `grad-reverse`
    script: `sys.argv[0]` is the script. On doubt: False, and the package
    imports as usual (the command line still works, only slower and noisier).
    """
    argv = sys.argv if argv is None else argv
    orig_argv = getattr(sys, "orig_argv", None) if orig_argv is None else orig_argv
    if not argv:
        return False
    if argv[0] == "-m":
        return orig_argv is not None and _dash_m_module(argv, orig_argv) in (PACKAGE, PACKAGE + ".__main__")
    return os.path.basename(argv[0]) in SCRIPT_NAMES


_loading = False


@contextlib.contextmanager
def loading_package() -> Iterator[None]:
    """Wraps the package's `_load()`: while it runs, `package_getattr` does
    not start it again (a name not bound yet is then a plain AttributeError)."""
    global _loading
    _loading = True
    try:
        yield
    finally:
        _loading = False


def package_getattr(
    package: str, load: Callable[[], None], loaded_names: frozenset, submodules: frozenset
) -> Callable[[str], Any]:
    """The package's module `__getattr__` (PEP 562), reached only for names
    not bound yet: a submodule is imported; a public name bound by `load`
    runs it first (unless it is running)."""

    def __getattr__(name: str) -> Any:
        if name in submodules:
            # What `from grad_reverse import reference` in a submodule would do
            # anyway; loading everything here instead could re-enter a module
            # that is still being imported.
            return importlib.import_module(f"{package}.{name}")
        if name in loaded_names and not _loading:
            load()
            return getattr(sys.modules[package], name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def _dash_m_module(argv: Sequence[str], orig_argv: Sequence[str]) -> str:
    """The module of `python [options] -m MODULE args...`: the interpreter's
    word just before the program's own arguments (`argv[1:]`)."""
    index = len(orig_argv) - len(argv)
    if index < 1:
        return ""
    word = orig_argv[index]
    if word.startswith("-"):  # "-mMODULE", or options run together: "-BmMODULE"
        return word.partition("m")[2]
    return word


_STREAMS_KEPT_OPEN: list = []


@contextlib.contextmanager
def tensorflow_start_filtered(enabled: bool = True) -> Iterator[None]:
    """Inside the block, collects what native code (TensorFlow's C++) writes
    to file descriptor 2, then writes it to stderr less TensorFlow's INFO
    records, absl's preamble, and the CUDA driver error of a machine without
    a GPU. Warnings and errors pass, after the block. Python's own stderr
    (`sys.stderr`: warnings, argparse errors, tracebacks) goes straight
    through all along. Wrap the code that imports TensorFlow.

    A file, not a pipe, collects: nothing can block on a full pipe. If the
    process dies inside the block, what was collected is lost; `--verbose`
    (enabled=False) runs without the filter.
    """
    python_stderr = sys.stderr
    if not enabled or python_stderr is None:
        yield
        return
    python_stderr.flush()
    try:
        original = os.dup(2)
    except OSError:  # no file descriptor 2 to filter
        yield
        return
    encoding = getattr(python_stderr, "encoding", None) or "utf-8"
    errors = getattr(python_stderr, "errors", None) or "backslashreplace"
    # Never closed (closefd=False: nor warned about at exit): a logging
    # handler made while TensorFlow loads (TensorFlow makes its own) keeps the
    # stream it found in sys.stderr, and must still write after the block.
    # One file descriptor per block.
    direct = open(os.dup(original), "w", encoding=encoding, errors=errors, buffering=1, closefd=False)  # noqa: SIM115
    _STREAMS_KEPT_OPEN.append(direct)
    with tempfile.TemporaryFile() as native:
        os.dup2(native.fileno(), 2)
        sys.stderr = direct
        try:
            yield
        finally:
            # Still collecting: listing the devices is what starts CUDA, and
            # so what writes its error on a machine without a driver.
            gpu_found = _tensorflow_found_a_gpu()
            sys.stderr = python_stderr
            direct.flush()
            os.dup2(original, 2)
            os.close(original)
            native.seek(0)
            text = native.read().decode("utf-8", errors="replace")
            kept = filter_start_up_lines(text, gpu_found=gpu_found)
            if kept:
                sys.stderr.write(kept)
                sys.stderr.flush()


def filter_start_up_lines(text: str, gpu_found: bool = True) -> str:
    """`text` less INFO records (with their continuation lines), absl's
    preamble and, when no GPU was found, the cuInit failure record."""
    kept = []
    dropping = False
    for line in text.splitlines(keepends=True):
        record = _RECORD.match(line)
        if record:
            level = record.group("level")
            dropping = level == "I" or (level == "E" and not gpu_found and _NO_CUDA_DRIVER in line)
        elif line.rstrip("\r\n") == _ABSL_PREAMBLE:
            continue
        elif _NATIVE_LINE_OF_ITS_OWN.match(line):
            dropping = False
        # Any other line continues the record before it (TensorFlow's CPU
        # feature notice has two lines) and shares its fate.
        if not dropping:
            kept.append(line)
    return "".join(kept)


def _tensorflow_found_a_gpu() -> bool:
    """Whether TensorFlow, if loaded, lists a GPU. True when it cannot tell,
    so that a CUDA error is kept wherever a GPU might be expected."""
    tf = sys.modules.get("tensorflow")
    try:
        return bool(tf.config.list_physical_devices("GPU"))
    except Exception:  # not loaded, or not far enough to ask
        return True
