"""The framework-free kernel module and the op library's CPU-path switch, for
tests/op/. Imports no TensorFlow (scripts/sanitize.sh and scripts/tsan.sh run
the kernel tests without it, with --noconftest)."""

import ctypes
import importlib.machinery
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")  # ships with TensorFlow

if os.environ.get("GRAD_REVERSE_KERNELS_DIR"):
    # A kernels-only build (scripts/sanitize.sh): import the module by itself,
    # without the package, which would import TensorFlow.
    _spec = importlib.machinery.PathFinder.find_spec("_kernels", [os.environ["GRAD_REVERSE_KERNELS_DIR"]])
    if _spec is None or _spec.loader is None:
        raise ImportError(f"no module _kernels in GRAD_REVERSE_KERNELS_DIR={os.environ['GRAD_REVERSE_KERNELS_DIR']}")
    _kernels = sys.modules["_kernels"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_kernels)
else:
    from grad_reverse import _kernels

HALF_TYPES = [np.float16, ml_dtypes.bfloat16]


def run_with_cpu_path_variable(value: str, code: str) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter that imports this very module file
    as `_kernels` (without the package, so without TensorFlow)."""
    prelude = (
        "import importlib.machinery, importlib.util\n"
        f"loader = importlib.machinery.ExtensionFileLoader('_kernels', {_kernels.__file__!r})\n"
        "spec = importlib.util.spec_from_loader('_kernels', loader)\n"
        "_kernels = importlib.util.module_from_spec(spec); loader.exec_module(_kernels)\n"
        "import numpy as np\n"
    )
    env = dict(os.environ, GRAD_REVERSE_CPU_PATH=value)
    return subprocess.run([sys.executable, "-c", prelude + code], env=env, capture_output=True, text=True, timeout=120)


def op_library() -> ctypes.CDLL:
    """The loaded op library's ctypes handle (its C functions typed), for the
    functions that report and force the CPU path (cc/compute/cpu_paths.h).
    Imports the package, so TensorFlow: call it only from a test that has."""
    from grad_reverse import ops

    return ops.LIBRARY.cdll
