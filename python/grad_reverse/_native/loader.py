"""Loads the chosen native op library once, after checking it matches this
TensorFlow, into the one handle the rest of the package uses (`loaded()`).

`tf.load_op_library` on a library compiled against another TensorFlow
release can crash the process, and so can dlopen on a truncated file, so
before loading: the release recorded at build time is compared with the
running one (a C++ library must match its minor release; the stable-ABI
library loads into any supported one), and the file's ELF headers are
checked (`elf`). After loading: the stable library's registration is
checked and its threads capped, and late XLA kernels are registered
(`calls`). Which library: `choice`.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from grad_reverse._keras import require_tensorflow_backend

# The first import of TensorFlow in the package (grad_reverse/__init__.py
# imports this module first): the wheel does not install TensorFlow (it cannot
# know whether the user wants `tensorflow` or `tensorflow-cpu`).
try:
    # Every TensorFlow-only module of the package imports this one, directly
    # or not: on Keras' JAX or PyTorch backend they say so here, before
    # TensorFlow (a TensorFlowOnly error, which the except below lets pass).
    require_tensorflow_backend("The native op library")
    import tensorflow as tf
except ModuleNotFoundError as error:
    if error.name != "tensorflow":
        raise
    import importlib.util

    # Keras on its default backend (no KERAS_BACKEND) in an environment with JAX or
    # PyTorch and no TensorFlow: most likely that user wants the layer there; say so first.
    _other = [name for name in ("jax", "torch") if importlib.util.find_spec(name) is not None]
    _first = (
        f"Keras runs on TensorFlow, its default backend (KERAS_BACKEND is not set), and this environment has "
        f"{' and '.join(_other)} but no TensorFlow: for the GradReverse layer and the models on {_other[0]}, set "
        f"KERAS_BACKEND={_other[0]} (docs/keras-backends.md). For the rest of grad_reverse: "
        if _other and not os.environ.get("KERAS_BACKEND")
        else ""
    )
    raise ImportError(
        _first + "grad_reverse needs TensorFlow 2.15 or newer (its own C++ libraries for 2.15 to 2.21, its "
        "stable-ABI library for any later release), and none is installed here: "
        '`pip install tensorflow` (with GPU support on Linux: `pip install "tensorflow[and-cuda]"`) '
        "or `pip install tensorflow-cpu`, then import grad_reverse again. "
        "(For the GradReverse layer and the models on Keras' JAX or PyTorch backend, set KERAS_BACKEND=jax or torch: "
        "docs/keras-backends.md.)"
    ) from None

from grad_reverse._native.calls import configure_stable, open_library, register_late_xla_kernels
from grad_reverse._native.choice import (
    BUILD_HINT,
    BUILD_INFO_NAME,
    LIBRARY_NAME,
    NEWEST,
    OLDEST,
    Choice,
    chosen,
    fall_back_to_stable,
    release_of,
    series,
)
from grad_reverse._native.elf import elf_problem
from grad_reverse._native.settings import STABLE
from grad_reverse._native.user_warning import warn_at_user

# What dlopen reports for a function no loaded library defines.
_MISSING_C_FUNCTION = re.compile(r"undefined symbol: (TF_\w+)")
_UNDEFINED_SYMBOL = re.compile(r"undefined symbol: ([\w.$@]+)")


def read_build_info(directory: Path) -> dict[str, Any]:
    """The facts CMake recorded next to the library (TensorFlow version, CUDA, XLA)."""
    path = directory / BUILD_INFO_NAME
    try:
        info = json.loads(path.read_text())
        if not isinstance(info, dict):
            raise ValueError("not a JSON object")
        return info
    except (OSError, ValueError) as error:
        raise ImportError(f"grad_reverse: cannot read the build record {path} ({error}). {BUILD_HINT}") from None


@dataclass(frozen=True)
class Library:
    """A loaded op library: the op module TensorFlow made of it (`module.grad_reverse`,
    `module.grad_reverse_grad`), its file, its build record, and the same
    file opened through ctypes with its C functions typed (`calls`)."""

    module: ModuleType
    path: Path
    build_info: dict[str, Any]
    cdll: ctypes.CDLL


_loaded: Library | None = None


def loaded() -> Library:
    """This process's library, loaded at the first call (by `ops`, when the
    package is imported); the same handle at every later call."""
    global _loaded
    if _loaded is None:
        _loaded = load_library()
    return _loaded


def load_library(directory: Path | None = None) -> Library:
    """Loads a library and returns its handle, or raises ImportError; `loaded()`
    is this process's own.

    `directory` holds one library and its record; by default the folder
    `chosen()` names for this process, whose warning (if any) is given here,
    once, and whose kind and reason are added to the record as "library".
    In `auto` mode, a C++ library that dlopen refuses for an undefined symbol
    (this TensorFlow moved a C++ symbol it was linked against) is replaced by
    the stable-ABI library, with a warning naming the symbol; in `release`
    mode that is an ImportError."""
    if directory is not None:
        return _load(directory, None)
    choice = chosen()
    if choice.warning:
        warn_at_user(choice.warning)  # at the user's import, not at ops.py
    try:
        return _load(choice.directory, choice)
    except _CppAbiMismatch as mismatch:
        # `auto` only (choice.fallback): `release` keeps the error.
        fallback = fall_back_to_stable(choice, mismatch.symbol)
        warn_at_user(fallback.warning)
        return _load(fallback.directory, fallback)


class _CppAbiMismatch(ImportError):
    """A C++ library that dlopen refused for a symbol this TensorFlow does not
    define, where the stable library may be loaded instead."""

    def __init__(self, message: str, symbol: str) -> None:
        super().__init__(message)
        self.symbol = symbol


def _load(directory: Path, choice: Choice | None) -> Library:
    library = directory / LIBRARY_NAME
    if not library.is_file():
        raise ImportError(f"grad_reverse: the native op library was not found at {library}. {BUILD_HINT}")
    info = read_build_info(directory)
    built, running = info.get("tensorflow_version"), tf.__version__
    stable = info.get("abi") == STABLE
    if not stable and series(str(built)) != series(running):
        raise ImportError(
            f"grad_reverse: {library} was built against TensorFlow {built}, but this "
            f"process runs TensorFlow {running}; a custom op must be compiled against "
            f"the TensorFlow minor release it is loaded into. Rebuild it here with "
            f"`pip install --force-reinstall --no-deps .` from the source tree, or "
            f"install TensorFlow {series(str(built))}."
        )
    oldest = info.get("oldest_tensorflow") if stable else None
    if oldest and release_of(running) is not None and release_of(running) < (release_of(str(oldest)) or (0, 0)):
        # A source build's stable library, built against a newer release
        # than this one: it may bind what this release lacks (dlopen would
        # say only "version `tensorflow' not found").
        raise ImportError(
            f"grad_reverse: the stable-ABI library {library} was built against TensorFlow {built} "
            f"({info.get('headers_note') or 'a source build'}), but this process runs TensorFlow "
            f"{running}. Rebuild it here with `pip install --force-reinstall --no-deps .` from the "
            f"source tree, or install TensorFlow {oldest} or newer."
        )
    problem = elf_problem(library)
    if problem:
        raise ImportError(
            f"grad_reverse: the native op library {library} cannot be loaded: {problem}. "
            f"The installation is damaged: reinstall grad-reverse."
        )
    try:
        module = tf.load_op_library(str(library))
    except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError, OSError) as error:
        missing = _MISSING_C_FUNCTION.search(str(error))
        if stable and missing:
            raise ImportError(
                f"grad_reverse: TensorFlow {running} does not export the C API function "
                f"{missing.group(1)}, which the stable-ABI library {library} calls: this release "
                f"broke TensorFlow's stable C API. Install a TensorFlow that grad-reverse has C++ "
                f"libraries for ({OLDEST} to {NEWEST}), and report it to grad-reverse."
            ) from None
        message = (
            f"grad_reverse: the native op library {library} cannot be loaded: "
            f"{str(error).strip()}. The installation is damaged: reinstall grad-reverse."
        )
        undefined = _UNDEFINED_SYMBOL.search(str(error))
        # dlopen refuses the whole library before any of its code runs, so
        # no op of it was registered and the stable one can still load.
        if choice is not None and choice.fallback is not None and undefined:
            raise _CppAbiMismatch(message, undefined.group(1)) from None
        # What dlopen says of a truncated or corrupted file ("file too short",
        # "invalid ELF header", a missing symbol).
        raise ImportError(message) from None
    handle = open_library(library)  # dlopen of a loaded path: the library TensorFlow loaded
    if stable:
        configure_stable(handle, library)
    if info.get("xla"):
        info["late_xla_kernels"] = register_late_xla_kernels(handle)
    if choice is not None:
        info["library"] = {"kind": choice.kind, "path": str(library), "reason": choice.reason}
    return Library(module, library, info, handle)
