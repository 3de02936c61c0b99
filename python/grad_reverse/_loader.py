"""Chooses and loads the native op library once, after checking it matches this TensorFlow.

This is the one place that knows where the libraries live and how they were
built. Two kinds, each in its folder of `_libs/` with its build record:

* per-release C++ libraries, `_libs/tf<major>.<minor>/`: a custom op written
  against TensorFlow's C++ API is bound to the ABI of one minor release, so a
  source build (`pip install .`) holds the one of the TensorFlow it was built
  against, the portable wheel (build_pip_pkg.sh) one for each supported
  release. A patch release loads its minor's library. `tf.load_op_library`
  on a library compiled against another release can crash the process, so
  the release recorded at build time is compared first.
* the stable-ABI library, `_libs/stable/` (cc/stable/): written against
  TensorFlow's C API only, which does not move between releases, so it loads
  into every TensorFlow from the oldest supported release on, newer ones
  included; it has no XLA and no CUDA backward kernels.

GRAD_REVERSE_LIBRARY (read once, at import) chooses: `auto` (the default)
takes the running release's own library where this installation holds one,
else the stable one; `release` and `stable` take only that kind.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import struct
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

# The first import of TensorFlow in the package (grad_reverse/__init__.py
# imports this module first): the wheel does not install TensorFlow (it cannot
# know whether the user wants `tensorflow` or `tensorflow-cpu`).
try:
    import tensorflow as tf
except ModuleNotFoundError as error:
    if error.name != "tensorflow":
        raise
    raise ImportError(
        "grad_reverse needs TensorFlow 2.15 to 2.21, and none is installed here: "
        "`pip install tensorflow` (with GPU support on Linux: `pip install \"tensorflow[and-cuda]\"`) "
        "or `pip install tensorflow-cpu`, then import grad_reverse again."
    ) from None

PACKAGE_DIR = Path(__file__).resolve().parent
LIBRARIES_DIR = PACKAGE_DIR / "_libs"
LIBRARY_NAME = "_grad_reverse_ops.so"
BUILD_INFO_NAME = "_build_info.json"
# The releases grad-reverse supports (build_tools/tensorflow_requirement.py
# holds the same range for the build; tests/test_loader.py checks they agree).
SUPPORTED = ((2, 15), (2, 21))
_OLDEST, _NEWEST = ("%d.%d" % release for release in SUPPORTED)
BUILD_HINT = (
    "Build and install it from the grad-reverse source tree with "
    "`pip install .` (it compiles against the TensorFlow installed in that "
    "environment)."
)


def _release(version: str) -> Optional[tuple[int, int]]:
    """(2, 21) for "2.21.0", "2.21.0rc1" or "2.21"; None if it has no minor."""
    match = re.match(r"\s*(\d+)\.(\d+)", version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def series(version: str) -> str:
    """"2.21" for "2.21.0", "2.21.0rc1" or "2.21"; the version itself if it has no minor."""
    release = _release(version)
    return "%d.%d" % release if release else str(version)


def releases_held(libraries_dir: Path = LIBRARIES_DIR) -> list[str]:
    """The TensorFlow minor releases this installation holds a library for, oldest first."""
    found = []
    if libraries_dir.is_dir():
        for folder in libraries_dir.iterdir():
            match = re.fullmatch(r"tf(\d+)\.(\d+)", folder.name)
            if match and (folder / LIBRARY_NAME).is_file():
                found.append((int(match.group(1)), int(match.group(2))))
    return [f"{major}.{minor}" for major, minor in sorted(found)]


def library_dir(libraries_dir: Path = LIBRARIES_DIR, running: Optional[str] = None) -> Path:
    """The folder of the library for the running TensorFlow, or ImportError
    naming the running release and the ones this installation holds."""
    running = running or tf.__version__
    folder = libraries_dir / f"tf{series(running)}"
    if folder.is_dir():
        return folder
    held = releases_held(libraries_dir)
    if not held:
        raise ImportError(
            f"grad_reverse: no native op library was found in {libraries_dir}. {BUILD_HINT}"
        )
    wanted, release = series(running), _release(running)
    if release is not None and SUPPORTED[0] <= release <= SUPPORTED[1]:
        other_way = (", or build grad-reverse from source against this TensorFlow "
                     "(`pip install --no-deps --force-reinstall .` in the grad-reverse source tree)")
    else:
        other_way = f"; TensorFlow {wanted} is outside the supported range"
    choices = " or ".join(held) if len(held) < 3 else f"{held[0]} to {held[-1]}"
    raise ImportError(
        f"grad_reverse: this process runs TensorFlow {running}, but this installation of "
        f"grad-reverse holds op libraries for TensorFlow {', '.join(held)} only (in "
        f"{libraries_dir}); grad-reverse supports TensorFlow {_OLDEST} to {_NEWEST}, and a custom "
        f"op must be compiled for the TensorFlow minor release it is loaded into. Install "
        f"TensorFlow {choices} (for example `pip install \"tensorflow-cpu=={held[-1]}.*\"`)"
        f"{other_way}."
    )


STABLE_DIR_NAME = "stable"
LIBRARY_VARIABLE = "GRAD_REVERSE_LIBRARY"
AUTO, RELEASE, STABLE = "auto", "release", "stable"
LIBRARY_MODES = (AUTO, RELEASE, STABLE)
STABLE_COSTS = (
    "no XLA kernels (XLA-compiled functions run the pure-Python version, which XLA compiles to "
    "the same HLO) and no CUDA backward kernel (on a GPU the backward runs stock TensorFlow ops, "
    "with the same results); the CPU kernels and the GPU forward are the same"
)


@dataclass(frozen=True)
class Choice:
    """The library to load: its folder, its kind (RELEASE or STABLE), why it
    was chosen (for `python -m grad_reverse info`), and what to warn at
    import (None when nothing)."""

    directory: Path
    kind: str
    reason: str
    warning: Optional[str] = None


def parse_library_mode(value: Optional[str]) -> str:
    """The mode a value of GRAD_REVERSE_LIBRARY names (unset or empty: auto)."""
    mode = (value or AUTO).strip().lower()
    if mode not in LIBRARY_MODES:
        raise ImportError(
            f"grad_reverse: {LIBRARY_VARIABLE}={value!r} is not a valid value; accepted values: "
            f"{AUTO} (the default: this TensorFlow's own library where the installation holds "
            f"one, else the stable-ABI library), {RELEASE}, {STABLE}."
        )
    return mode


def choose(libraries_dir: Path = LIBRARIES_DIR, running: Optional[str] = None,
           mode: Optional[str] = None) -> Choice:
    """Which library this process loads, or ImportError saying why none can be.

    `mode` is GRAD_REVERSE_LIBRARY's value (None: read the environment)."""
    running = running or tf.__version__
    mode = parse_library_mode(os.environ.get(LIBRARY_VARIABLE) if mode is None else mode)
    stable = libraries_dir / STABLE_DIR_NAME
    stable_held = has_stable(libraries_dir)
    release = _release(running)
    if release is not None and release < SUPPORTED[0]:
        raise ImportError(
            f"grad_reverse: this process runs TensorFlow {running}; grad-reverse supports TensorFlow "
            f"{_OLDEST} and newer (tested: {_OLDEST} to "
            f"{_NEWEST}). Install a newer TensorFlow (for example "
            f"`pip install \"tensorflow-cpu=={_NEWEST}.*\"`)."
        )
    if mode == STABLE:
        if not stable_held:
            raise ImportError(
                f"grad_reverse: {LIBRARY_VARIABLE}={STABLE}, but this installation has no "
                f"stable-ABI library ({stable / LIBRARY_NAME}). Unset it, or reinstall grad-reverse "
                f"(its wheel and a source build both hold one)."
            )
        return Choice(stable, STABLE, f"chosen by {LIBRARY_VARIABLE}={STABLE}")
    own = libraries_dir / f"tf{series(running)}"
    if mode == RELEASE or own.is_dir() or not stable_held:
        directory = library_dir(libraries_dir, running)
        why = f"chosen by {LIBRARY_VARIABLE}={RELEASE}" if mode == RELEASE else (
            f"the C++ library built for TensorFlow {series(running)}, the running release")
        return Choice(directory, RELEASE, why)
    held = releases_held(libraries_dir)
    held_text = f"it holds C++ libraries for TensorFlow {', '.join(held)}" if held else "it holds no C++ library"
    if release is not None and release > SUPPORTED[1]:
        reason = (f"TensorFlow {running} is newer than the releases this grad-reverse was built and "
                  f"tested for ({_OLDEST} to {_NEWEST})")
    else:
        reason = f"this installation has no C++ library for TensorFlow {series(running)} ({held_text})"
    warning = (
        f"grad_reverse: {reason}: using its stable-ABI library (TensorFlow's C API, one build for "
        f"every release). What that costs: {STABLE_COSTS}. `python -m grad_reverse info` says what "
        f"runs where; set {LIBRARY_VARIABLE}={STABLE} to choose it explicitly and silence this warning."
    )
    return Choice(stable, STABLE, reason, warning)


def has_stable(libraries_dir: Path = LIBRARIES_DIR) -> bool:
    """Whether this installation holds the stable-ABI library."""
    return (libraries_dir / STABLE_DIR_NAME / LIBRARY_NAME).is_file()


_chosen: Optional[Choice] = None


def chosen() -> Choice:
    """The choice for this process, made once (GRAD_REVERSE_LIBRARY is read once)."""
    global _chosen
    if _chosen is None:
        _chosen = choose()
    return _chosen


def library_path(libraries_dir: Path = LIBRARIES_DIR) -> Path:
    """The op library this process loads (or would load)."""
    if libraries_dir == LIBRARIES_DIR:
        return chosen().directory / LIBRARY_NAME
    return choose(libraries_dir).directory / LIBRARY_NAME


def read_build_info(directory: Path) -> dict[str, Any]:
    """The facts CMake recorded next to the library (TensorFlow version, CUDA, XLA)."""
    path = directory / BUILD_INFO_NAME
    try:
        info = json.loads(path.read_text())
        if not isinstance(info, dict):
            raise ValueError("not a JSON object")
        return info
    except (OSError, ValueError) as error:
        raise ImportError(
            f"grad_reverse: cannot read the build record {path} ({error}). {BUILD_HINT}"
        ) from None


def load_library(directory: Optional[Path] = None) -> tuple[ModuleType, dict[str, Any]]:
    """Returns (the loaded op module, its build record), or raises ImportError.

    `directory` holds one library and its record; by default the folder
    `chosen()` names for this process, whose warning (if any) is given here,
    once, and whose kind and reason are added to the record as "library"."""
    choice = None
    if directory is None:
        choice = chosen()
        directory = choice.directory
        if choice.warning:
            from grad_reverse._backward import _stacklevel_outside_package  # the user's import, not ops.py

            warnings.warn(choice.warning, RuntimeWarning, stacklevel=_stacklevel_outside_package())
    library = directory / LIBRARY_NAME
    if not library.is_file():
        raise ImportError(
            f"grad_reverse: the native op library was not found at {library}. {BUILD_HINT}"
        )
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
    problem = _elf_problem(library)
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
                f"broke TensorFlow's stable C API. Install a TensorFlow that grad-reverse supports "
                f"({_OLDEST} to {_NEWEST}), and report it to grad-reverse."
            ) from None
        # What dlopen says of a truncated or corrupted file ("file too short",
        # "invalid ELF header", a missing symbol).
        raise ImportError(
            f"grad_reverse: the native op library {library} cannot be loaded: "
            f"{str(error).strip()}. The installation is damaged: reinstall grad-reverse."
        ) from None
    if stable:
        _configure_stable(library)
    if info.get("xla"):
        info["late_xla_kernels"] = _register_late_xla_kernels(library)
    if choice is not None:
        info["library"] = {"kind": choice.kind, "path": str(library), "reason": choice.reason}
    return module, info


# What dlopen reports for a function no loaded library defines.
_MISSING_C_FUNCTION = re.compile(r"undefined symbol: (TF_\w+)")


def _configure_stable(library: Path) -> None:
    """Checks the stable library registered everything, and caps its CPU
    threads at TensorFlow's intra-op parallelism when one is configured
    (0: TensorFlow's default, every CPU, which is the library's too)."""
    handle = ctypes.CDLL(str(library))
    error = handle.GradReverseStableRegistrationError
    error.restype = ctypes.c_char_p
    refused = error()
    if refused:
        raise ImportError(
            f"grad_reverse: the stable-ABI library {library} could not register its ops with "
            f"TensorFlow {tf.__version__}: {refused.decode()}."
        )
    threads = _configured_intra_op_threads()
    if threads > 0:
        handle.GradReverseSetMaxThreads(ctypes.c_int(threads))


def _configured_intra_op_threads() -> int:
    """tf.config.threading's intra-op setting, 0 when unset, read without
    initialising the devices: the public getter does (it asks CUDA for GPUs,
    which logs a cuInit failure on a machine without a driver, at import)."""
    from tensorflow.python.eager import context  # private: no public getter that leaves devices alone

    return int(getattr(context.context(), "_intra_op_parallelism_threads", None) or 0)


def _elf_problem(path: Path) -> Optional[str]:
    """Why `path` is not a whole 64-bit ELF file, or None. Checked before
    dlopen, which maps the file and can kill the process (SIGBUS) when a
    truncated file ends before its segments do, instead of failing."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as file:
            header = file.read(64)
            if header[:4] != b"\x7fELF" or len(header) < 64:
                return "it is not an ELF shared library"
            if header[4] != 2:
                return "it is not a 64-bit ELF file"
            order = "<" if header[5] == 1 else ">"
            program_offset, section_offset = struct.unpack_from(order + "QQ", header, 0x20)
            entry_size, entries, section_size, sections = struct.unpack_from(order + "HHHH", header, 0x36)
            ends = [section_offset + section_size * sections, program_offset + entry_size * entries]
            if max(ends) <= size:
                file.seek(program_offset)
                table = file.read(entry_size * entries)
                for start in range(0, len(table) - entry_size + 1, entry_size):
                    offset, = struct.unpack_from(order + "Q", table, start + 8)
                    file_size, = struct.unpack_from(order + "Q", table, start + 32)
                    ends.append(offset + file_size)
    except (OSError, struct.error) as error:
        return f"it cannot be read ({error})"
    if max(ends) > size:
        return f"it is truncated ({size} bytes; its contents reach byte {max(ends)})"
    return None


def _register_late_xla_kernels(library: Path) -> int:
    """Gives the op its XLA kernels if TensorFlow registered its own before this
    library was loaded (see grad_reverse_xla.cc). Returns how many it added."""
    # dlopen of an already-loaded path returns that same library.
    return ctypes.CDLL(str(library)).GradReverseRegisterLateXlaKernels()


def cuda_driver_version(library: Optional[Path] = None) -> int:
    """The NVIDIA driver's CUDA version (12040 is 12.4; 0: no driver), asked
    through the loaded library's static CUDA runtime; -1 when the library
    has no CUDA or cannot tell. Call it only where TensorFlow sees a GPU."""
    try:
        query = ctypes.CDLL(str(library or library_path())).GradReverseCudaDriverVersion
    except (OSError, AttributeError, ImportError):  # a library older than this query
        return -1
    query.restype = ctypes.c_int
    return int(query())
