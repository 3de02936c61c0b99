"""Facts about this process's GPUs that the choice of backward (_backward.py)
rests on: the GPUs TensorFlow sees, and CUDA version numbers.

The driver's CUDA version itself is asked through the op library
(`_loader.cuda_driver_version`), whose statically linked CUDA runtime is the
one its kernels need a driver for.
"""

from __future__ import annotations

import re
from typing import Optional

import tensorflow as tf


def visible_gpus() -> list[str]:
    """The GPUs TensorFlow sees (physical device names)."""
    # A CPU-only TensorFlow cannot see GPUs: ask it nothing (listing physical
    # devices initialises the CUDA platform of a GPU build).
    if not tf.test.is_built_with_cuda():
        return []
    return [device.name for device in tf.config.list_physical_devices("GPU")]


def major_version(version: str) -> Optional[int]:
    """The major number of a version string ("13.0.88" -> 13), None if there is none."""
    match = re.match(r"\s*(\d+)", version or "")
    return int(match.group(1)) if match else None


def format_cuda_version(version: Optional[int]) -> str:
    """A driver API version number as CUDA writes it: 12040 -> "12.4"."""
    if version is None or version < 0:
        return "unknown"
    return f"{version // 1000}.{version % 1000 // 10}"
