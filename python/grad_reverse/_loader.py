"""Chooses and loads the native op library once, after checking it matches this TensorFlow.

This is the one place that knows where the libraries live and how they were
built. A custom op is bound to the C++ ABI of one TensorFlow minor release, so
the package holds one library per release it was built for, each with its
build record, in `_libs/tf<major>.<minor>/`: a source build (`pip install .`)
holds the one of the TensorFlow it was built against, the portable wheel
(build_pip_pkg.sh) one for each supported release. The folder of the running
TensorFlow's minor release is loaded; a patch release loads its minor's
library. `tf.load_op_library` on a library compiled against another release
can crash the process, so the release recorded at build time is compared
first.
"""

from __future__ import annotations

import ctypes
import json
import re
import struct
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
    oldest, newest = ("%d.%d" % release for release in SUPPORTED)
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
        f"{libraries_dir}); grad-reverse supports TensorFlow {oldest} to {newest}, and a custom "
        f"op must be compiled for the TensorFlow minor release it is loaded into. Install "
        f"TensorFlow {choices} (for example `pip install \"tensorflow-cpu=={held[-1]}.*\"`)"
        f"{other_way}."
    )


def library_path(libraries_dir: Path = LIBRARIES_DIR) -> Path:
    """The op library this process loads (or would load)."""
    return library_dir(libraries_dir) / LIBRARY_NAME


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
    `library_dir()` chooses for the running TensorFlow."""
    directory = library_dir() if directory is None else directory
    library = directory / LIBRARY_NAME
    if not library.is_file():
        raise ImportError(
            f"grad_reverse: the native op library was not found at {library}. {BUILD_HINT}"
        )
    info = read_build_info(directory)
    built, running = info.get("tensorflow_version"), tf.__version__
    if series(str(built)) != series(running):
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
        # What dlopen says of a truncated or corrupted file ("file too short",
        # "invalid ELF header", a missing symbol).
        raise ImportError(
            f"grad_reverse: the native op library {library} cannot be loaded: "
            f"{str(error).strip()}. The installation is damaged: reinstall grad-reverse."
        ) from None
    if info.get("xla"):
        info["late_xla_kernels"] = _register_late_xla_kernels(library)
    return module, info


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
