"""The package's calls into the op library through ctypes.

The library exports a few C functions beside its ops: the stable-ABI
library's registration result and thread cap, the late registration of the
XLA kernels, the CPU path and streaming-store choices, and the CUDA driver's
version as the library's own statically linked CUDA runtime sees it (the
runtime its kernels need a driver for). `open_library` opens a library
file once and types its functions; `dlopen` of a path TensorFlow loaded
returns that same library. Each call takes that handle: the process's own
is `loader.loaded().cdll`.
"""

from __future__ import annotations

import ctypes
from pathlib import Path


def open_library(path: Path) -> ctypes.CDLL:
    """The library at `path` (loaded by TensorFlow or not) with its C
    functions typed once; a library older than some of them lacks those."""
    handle = ctypes.CDLL(str(path))
    typed = {
        "GradReverseStableRegistrationError": (ctypes.c_char_p, None),
        "GradReverseCudaDriverVersion": (ctypes.c_int, []),
        "GradReverseCpuPath": (ctypes.c_char_p, []),
        "GradReverseSetCpuPath": (ctypes.c_int, [ctypes.c_char_p]),
        "GradReverseStreamingStores": (ctypes.c_char_p, []),
        "GradReverseSetStreamingStores": (ctypes.c_int, [ctypes.c_char_p]),
        "GradReverseStreamingStorePasses": (ctypes.c_int64, []),
        "GradReverseStreamingStoresAt": (ctypes.c_int, [ctypes.c_int64]),
        "GradReverseStreamingStoresWin": (
            ctypes.c_int,
            [ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double), ctypes.c_int],
        ),
    }
    for name, (restype, argtypes) in typed.items():
        function = getattr(handle, name, None)
        if function is not None:
            function.restype = restype
            if argtypes is not None:
                function.argtypes = argtypes
    return handle


def configure_stable(handle: ctypes.CDLL, path: Path) -> None:
    """Checks the stable library registered everything, and caps its CPU
    threads at TensorFlow's intra-op parallelism when one is configured
    (0: TensorFlow's default, every CPU, which is the library's too).

    Raises:
      ImportError: the library could not register its ops.
    """
    refused = handle.GradReverseStableRegistrationError()
    if refused:
        import tensorflow as tf

        raise ImportError(
            f"grad_reverse: the stable-ABI library {path} could not register its ops with "
            f"TensorFlow {tf.__version__}: {refused.decode()}."
        )
    threads = configured_intra_op_threads()
    if threads > 0:
        handle.GradReverseSetMaxThreads(ctypes.c_int(threads))


def configured_intra_op_threads() -> int:
    """tf.config.threading's intra-op setting, 0 when unset, read without
    initialising the devices: the public getter does (it asks CUDA for GPUs,
    which logs a cuInit failure on a machine without a driver, at import)."""
    from tensorflow.python.eager import context  # private: no public getter that leaves devices alone

    return int(getattr(context.context(), "_intra_op_parallelism_threads", None) or 0)


def register_late_xla_kernels(handle: ctypes.CDLL) -> int:
    """Gives the op its XLA kernels if TensorFlow registered its own before this
    library was loaded (see grad_reverse_xla.cc). Returns how many it added."""
    return handle.GradReverseRegisterLateXlaKernels()


def cuda_driver_version(handle: ctypes.CDLL) -> int:
    """The NVIDIA driver's CUDA version (12040 is 12.4; 0: no driver), asked
    through the library's static CUDA runtime; -1 when the library has no
    CUDA or cannot tell. Call it only where TensorFlow sees a GPU."""
    query = getattr(handle, "GradReverseCudaDriverVersion", None)
    if query is None:  # a library older than this query
        return -1
    return int(query())


def _stores_calls(handle: ctypes.CDLL) -> ctypes.CDLL | None:
    """`handle` if it has the streaming-store calls; None for a library older than them."""
    return handle if hasattr(handle, "GradReverseStreamingStores") else None


def streaming_stores(handle: ctypes.CDLL) -> str:
    """Whether the library's large out-of-place passes use streaming stores,
    and why, under `auto` per output size (see cc/compute/cpu_paths.h)."""
    if _stores_calls(handle) is None:
        return "unknown (this library cannot say)"
    return handle.GradReverseStreamingStores().decode()


def streaming_stores_at(handle: ctypes.CDLL, output_bytes: int) -> bool | None:
    """Whether an out-of-place pass writing `output_bytes` bytes uses streaming
    stores now; None while `auto` is still measuring outputs of that size."""
    if _stores_calls(handle) is None:
        return False
    choice = handle.GradReverseStreamingStoresAt(ctypes.c_int64(int(output_bytes)))
    return None if choice < 0 else choice == 1


def set_streaming_stores(handle: ctypes.CDLL, mode: str) -> None:
    """Forces the library's streaming-store choice (`auto`, `on`, `off`).

    Raises:
      ValueError: `mode` is not one of those; nothing changed.
      RuntimeError: the library is older than this choice.
    """
    if _stores_calls(handle) is None:
        raise RuntimeError("the loaded op library has no streaming-store choice (rebuild it)")
    if handle.GradReverseSetStreamingStores(str(mode).encode()) != 0:
        raise ValueError(f"streaming stores {mode!r} is not one of auto, on, off")


def streaming_store_passes(handle: ctypes.CDLL) -> int:
    """How many of the library's passes have written with streaming stores
    so far (-1: a library older than this count)."""
    return -1 if _stores_calls(handle) is None else int(handle.GradReverseStreamingStorePasses())


def streaming_stores_win(handle: ctypes.CDLL, plain: list[float], streaming: list[float]) -> bool:
    """The library's decision under `auto` for these measurements: seconds
    per byte of each pair's plain-store and streaming-store pass."""
    if len(plain) != len(streaming):
        raise ValueError("plain and streaming must hold one time per pair each")
    if _stores_calls(handle) is None:
        raise RuntimeError("the loaded op library has no streaming-store choice (rebuild it)")
    pairs = len(plain)
    array = ctypes.c_double * max(1, pairs)
    return bool(handle.GradReverseStreamingStoresWin(array(*plain), array(*streaming), pairs))


def cpu_path(handle: ctypes.CDLL) -> str:
    """The CPU path the library's kernels run (see cc/compute/cpu_paths.h)."""
    return handle.GradReverseCpuPath().decode()


def set_cpu_path(handle: ctypes.CDLL, name: str) -> None:
    """Forces the library's CPU path `name` (`auto`: the environment's choice).

    Raises:
      ValueError: the build or this CPU has no such path; nothing changed.
    """
    if handle.GradReverseSetCpuPath(str(name).encode()) != 0:
        raise ValueError(
            f"CPU path {name!r} is not one this build and this CPU support; "
            f"accepted: auto, or a path `python -m grad_reverse info` lists as available"
        )
