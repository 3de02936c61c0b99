"""Loads the native op library once, after checking it matches this TensorFlow.

This is the one place that knows where the library lives and how it was
built. `tf.load_op_library` on a library compiled against another TensorFlow
can crash the process (C++ ABI), so the version recorded at build time is
compared first.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import tensorflow as tf

PACKAGE_DIR = Path(__file__).resolve().parent
LIBRARY_NAME = "_grad_reverse_ops.so"
BUILD_INFO_NAME = "_build_info.json"
BUILD_HINT = (
    "Build and install it from the grad-reverse source tree with "
    "`pip install .` (it compiles against the TensorFlow installed in that "
    "environment)."
)


def read_build_info(directory: Path) -> dict[str, Any]:
    """The facts CMake recorded next to the library (TensorFlow version, CUDA, XLA)."""
    path = directory / BUILD_INFO_NAME
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ImportError(
            f"grad_reverse: cannot read the build record {path} ({error}). {BUILD_HINT}"
        ) from None


def load_library(directory: Path = PACKAGE_DIR) -> tuple[ModuleType, dict[str, Any]]:
    """Returns (the loaded op module, its build record), or raises ImportError."""
    library = directory / LIBRARY_NAME
    if not library.is_file():
        raise ImportError(
            f"grad_reverse: the native op library was not found at {library}. {BUILD_HINT}"
        )
    info = read_build_info(directory)
    built, running = info.get("tensorflow_version"), tf.__version__
    if built != running:
        raise ImportError(
            f"grad_reverse: {library} was built against TensorFlow {built}, but this "
            f"process runs TensorFlow {running}; a custom op must be compiled against "
            f"the exact TensorFlow it is loaded into. Rebuild it here with "
            f"`pip install --force-reinstall --no-deps .` from the source tree, or "
            f"install TensorFlow {built}."
        )
    module = tf.load_op_library(str(library))
    if info.get("xla"):
        info["late_xla_kernels"] = _register_late_xla_kernels(library)
    return module, info


def _register_late_xla_kernels(library: Path) -> int:
    """Gives the op its XLA kernels if TensorFlow registered its own before this
    library was loaded (see grad_reverse_xla.cc). Returns how many it added."""
    # dlopen of an already-loaded path returns that same library.
    return ctypes.CDLL(str(library)).GradReverseRegisterLateXlaKernels()


def cuda_driver_version(directory: Path = PACKAGE_DIR) -> int:
    """The NVIDIA driver's CUDA version (12040 is 12.4; 0: no driver), asked
    through the loaded library's static CUDA runtime; -1 when the library
    has no CUDA or cannot tell. Call it only where TensorFlow sees a GPU."""
    try:
        query = ctypes.CDLL(str(directory / LIBRARY_NAME)).GradReverseCudaDriverVersion
    except (OSError, AttributeError):  # a library older than this query
        return -1
    query.restype = ctypes.c_int
    return int(query())
