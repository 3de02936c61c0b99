"""Whether this process can run the op's GPU kernel, and a warning when not.

A TensorFlow GPU build on a machine with a GPU, loading a library built
without CUDA kernels (no nvcc at build time), still runs: TensorFlow places
GradReverseGrad on the CPU and copies every gradient from the GPU and back.
That is slow and silent, so the loader warns once, and `info` says the same.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Optional, Sequence

import tensorflow as tf


def _visible_gpus() -> list[str]:
    # A CPU-only TensorFlow cannot see GPUs: ask it nothing (listing physical
    # devices initialises the CUDA platform of a GPU build).
    if not tf.test.is_built_with_cuda():
        return []
    return [device.name for device in tf.config.list_physical_devices("GPU")]


def missing_gpu_kernels_message(build_info: dict[str, Any], gpus: Sequence[str]) -> Optional[str]:
    """The warning for a library without CUDA kernels in a process with GPUs, else None."""
    if build_info.get("cuda") or not gpus:
        return None
    why = build_info.get("cuda_note") or "it was built without CUDA kernels"
    tf_cuda = build_info.get("tensorflow_cuda_version") or tf.sysconfig.get_build_info().get("cuda_version")
    toolkit = f"a CUDA {tf_cuda} toolkit (the CUDA TensorFlow was built with)" if tf_cuda else "a CUDA toolkit"
    return (
        f"grad_reverse: TensorFlow sees {len(gpus)} GPU(s) ({', '.join(gpus)}), but the grad_reverse "
        f"library has no CUDA kernels ({why}). GradReverseGrad will run on the CPU, copying each "
        f"gradient from the GPU and back, unless XLA compiles it (jit_compile=True). To fix it, "
        f"install {toolkit} with nvcc on PATH and rebuild: "
        f"`pip install --force-reinstall --no-deps .` from the grad-reverse source tree."
    )


def warn_if_gpu_without_kernels(
    build_info: dict[str, Any], visible_gpus: Callable[[], list[str]] = _visible_gpus
) -> Optional[str]:
    """Warns (RuntimeWarning) when GPUs are visible but the library has no CUDA
    kernels; returns the message, or None when there is nothing to say."""
    if build_info.get("cuda"):
        return None  # the common case: no device query at all
    message = missing_gpu_kernels_message(build_info, visible_gpus())
    if message:
        warnings.warn(message, RuntimeWarning, stacklevel=2)
    return message
