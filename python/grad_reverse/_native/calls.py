"""The package's calls into the loaded op library through ctypes.

The library exports a few C functions beside its ops: the stable-ABI
library's registration result and thread cap, the late registration of the
XLA kernels, and the CUDA driver's version as the library's own statically
linked CUDA runtime sees it (the runtime its kernels need a driver for).
`dlopen` of an already-loaded path returns that same library, so each call
reaches the library TensorFlow loaded.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Optional


def configure_stable(library: Path) -> None:
    """Checks the stable library registered everything, and caps its CPU
    threads at TensorFlow's intra-op parallelism when one is configured
    (0: TensorFlow's default, every CPU, which is the library's too).

    Raises:
      ImportError: the library could not register its ops.
    """
    handle = ctypes.CDLL(str(library))
    error = handle.GradReverseStableRegistrationError
    error.restype = ctypes.c_char_p
    refused = error()
    if refused:
        import tensorflow as tf

        raise ImportError(
            f"grad_reverse: the stable-ABI library {library} could not register its ops with "
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


def register_late_xla_kernels(library: Path) -> int:
    """Gives the op its XLA kernels if TensorFlow registered its own before this
    library was loaded (see grad_reverse_xla.cc). Returns how many it added."""
    return ctypes.CDLL(str(library)).GradReverseRegisterLateXlaKernels()


def cuda_driver_version(library: Optional[Path] = None) -> int:
    """The NVIDIA driver's CUDA version (12040 is 12.4; 0: no driver), asked
    through the library's static CUDA runtime (by default the library this
    process loads); -1 when the library has no CUDA or cannot tell. Call it
    only where TensorFlow sees a GPU."""
    try:
        if library is None:
            from grad_reverse._library_choice import library_path

            library = library_path()
        query = ctypes.CDLL(str(library)).GradReverseCudaDriverVersion
    except (OSError, AttributeError, ImportError):  # a library older than this query
        return -1
    query.restype = ctypes.c_int
    return int(query())


def _loaded_library(library: Optional[Path] = None) -> ctypes.CDLL:
    from grad_reverse._library_choice import library_path

    handle = ctypes.CDLL(str(library or library_path()))
    handle.GradReverseCpuPath.restype = ctypes.c_char_p
    handle.GradReverseSetCpuPath.argtypes = [ctypes.c_char_p]
    return handle


def _stores_calls(library: Optional[Path] = None) -> Optional[ctypes.CDLL]:
    """The loaded library, with its streaming-store calls typed; None for a
    library older than them."""
    handle = _loaded_library(library)
    if not hasattr(handle, "GradReverseStreamingStores"):
        return None
    handle.GradReverseStreamingStores.restype = ctypes.c_char_p
    handle.GradReverseSetStreamingStores.argtypes = [ctypes.c_char_p]
    handle.GradReverseStreamingStorePasses.restype = ctypes.c_int64
    handle.GradReverseStreamingStoresAt.argtypes = [ctypes.c_int64]
    handle.GradReverseStreamingStoresWin.argtypes = [
        ctypes.POINTER(ctypes.c_double),
        ctypes.POINTER(ctypes.c_double),
        ctypes.c_int,
    ]
    return handle


def streaming_stores(library: Optional[Path] = None) -> str:
    """Whether the library's large out-of-place passes use streaming stores,
    and why, under `auto` per output size (see cc/compute/cpu_paths.h)."""
    handle = _stores_calls(library)
    if handle is None:
        return "unknown (this library cannot say)"
    return handle.GradReverseStreamingStores().decode()


def streaming_stores_at(output_bytes: int, library: Optional[Path] = None) -> Optional[bool]:
    """Whether an out-of-place pass writing `output_bytes` bytes uses streaming
    stores now; None while `auto` is still measuring outputs of that size."""
    handle = _stores_calls(library)
    if handle is None:
        return False
    choice = handle.GradReverseStreamingStoresAt(ctypes.c_int64(int(output_bytes)))
    return None if choice < 0 else choice == 1


def set_streaming_stores(mode: str, library: Optional[Path] = None) -> None:
    """Forces the library's streaming-store choice (`auto`, `on`, `off`).

    Raises:
      ValueError: `mode` is not one of those; nothing changed.
      RuntimeError: the library is older than this choice.
    """
    handle = _stores_calls(library)
    if handle is None:
        raise RuntimeError("the loaded op library has no streaming-store choice (rebuild it)")
    if handle.GradReverseSetStreamingStores(str(mode).encode()) != 0:
        raise ValueError(f"streaming stores {mode!r} is not one of auto, on, off")


def streaming_store_passes(library: Optional[Path] = None) -> int:
    """How many of the library's passes have written with streaming stores
    so far (-1: a library older than this count)."""
    handle = _stores_calls(library)
    return -1 if handle is None else int(handle.GradReverseStreamingStorePasses())


def streaming_stores_win(plain: list[float], streaming: list[float], library: Optional[Path] = None) -> bool:
    """The library's decision under `auto` for these measurements: seconds
    per byte of each pair's plain-store and streaming-store pass."""
    if len(plain) != len(streaming):
        raise ValueError("plain and streaming must hold one time per pair each")
    handle = _stores_calls(library)
    if handle is None:
        raise RuntimeError("the loaded op library has no streaming-store choice (rebuild it)")
    pairs = len(plain)
    array = ctypes.c_double * max(1, pairs)
    return bool(handle.GradReverseStreamingStoresWin(array(*plain), array(*streaming), pairs))


def cpu_path(library: Optional[Path] = None) -> str:
    """The CPU path the library's kernels run (see cc/compute/cpu_paths.h)."""
    return _loaded_library(library).GradReverseCpuPath().decode()


def set_cpu_path(name: str, library: Optional[Path] = None) -> None:
    """Forces the library's CPU path `name` (`auto`: the environment's choice).

    Raises:
      ValueError: the build or this CPU has no such path; nothing changed.
    """
    if _loaded_library(library).GradReverseSetCpuPath(str(name).encode()) != 0:
        raise ValueError(
            f"CPU path {name!r} is not one this build and this CPU support; "
            f"accepted: auto, or a path `python -m grad_reverse info` lists as available"
        )
