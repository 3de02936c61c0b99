"""Facts about this process's GPUs that the choice of backward (`backward_choice`)
rests on: the GPUs TensorFlow sees, their compute capabilities, CUDA version
numbers and the CUDA architectures a fatbin can run on.

The driver's CUDA version itself is asked through the op library
(`calls.cuda_driver_version`), whose statically linked CUDA runtime is the
one its kernels need a driver for.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable, Sequence

import tensorflow as tf

# The NVIDIA driver's library, as TensorFlow's CUDA platform loads it.
DRIVER_LIBRARY = "libcuda.so.1"


def visible_gpus(driver_has_devices: Callable[[], bool] | None = None) -> list[str]:
    """The GPUs TensorFlow sees (physical device names)."""
    # Listing physical devices initialises the CUDA platform of a GPU build,
    # which logs an error line ("failed call to cuInit") where there is no
    # driver or no device: at our import it would read as our error. So a
    # CPU-only TensorFlow is asked nothing, and a GPU build only once the
    # driver itself says it has a device.
    if not tf.test.is_built_with_cuda():
        return []
    if not (driver_has_devices or cuda_driver_has_devices)():
        return []
    return [device.name for device in tf.config.list_physical_devices("GPU")]


def cuda_driver_has_devices(load: Callable[[str], ctypes.CDLL] = ctypes.CDLL) -> bool:
    """Whether the CUDA driver loads, initialises and counts at least one
    device (honouring CUDA_VISIBLE_DEVICES, as it does for TensorFlow). Asks
    the driver API directly, which logs nothing; TensorFlow's own later
    cuInit gets the same answer."""
    try:
        driver = load(DRIVER_LIBRARY)
    except OSError:  # no driver installed
        return False
    count = ctypes.c_int(0)
    try:
        if driver.cuInit(0) != 0:  # CUDA_SUCCESS is 0; no device, a broken driver, ...
            return False
        return driver.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0
    except AttributeError:  # not a CUDA driver after all
        return False


def compute_capability(gpu: str) -> tuple[int, int] | None:
    """The compute capability of the GPU TensorFlow names `gpu` ((8, 6) for
    8.6), None when TensorFlow does not report it."""
    try:
        for device in tf.config.list_physical_devices("GPU"):
            if device.name == gpu:
                major, minor = tf.config.experimental.get_device_details(device)["compute_capability"]
                return int(major), int(minor)
    except Exception:  # noqa: BLE001 - any failure means "unknown", which the caller reports
        return None
    return None


def parse_architecture(entry: str) -> tuple[tuple[int, int], bool, bool]:
    """One CMAKE_CUDA_ARCHITECTURES entry as ((major, minor), has SASS, has PTX):
    "80-real" is SASS only, "90-virtual" PTX only, "90" both.

    Raises:
      ValueError: `entry` is not of that form.
    """
    match = re.fullmatch(r"\s*(\d+?)(\d)(-real|-virtual)?\s*", entry)
    if not match:
        raise ValueError(f"{entry!r} is not a CUDA architecture such as 80-real, 90-virtual or 90")
    suffix = match.group(3)
    return (int(match.group(1)), int(match.group(2))), suffix != "-virtual", suffix != "-real"


def runs_on(architectures: Sequence[str], capability: tuple[int, int]) -> bool:
    """Whether a fatbin built for `architectures` has code a GPU of
    `capability` can run: SASS of the same major and a minor no higher, or
    PTX for a capability no higher (the driver compiles it for the GPU)."""
    for entry in architectures:
        arch, sass, ptx = parse_architecture(entry)
        if sass and arch[0] == capability[0] and arch[1] <= capability[1]:
            return True
        if ptx and arch <= capability:
            return True
    return False


def major_version(version: str) -> int | None:
    """The major number of a version string ("13.0.88" -> 13), None if there is none."""
    match = re.match(r"\s*(\d+)", version or "")
    return int(match.group(1)) if match else None


def format_cuda_version(version: int | None) -> str:
    """A driver API version number as CUDA writes it: 12040 -> "12.4"."""
    if version is None or version < 0:
        return "unknown"
    return f"{version // 1000}.{version % 1000 // 10}"
