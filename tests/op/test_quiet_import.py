"""`import grad_reverse` prints nothing that `import tensorflow` does not.

The import decides the backward from the GPUs it finds; asking TensorFlow
for them initialises CUDA in a GPU build, which logs "failed call to cuInit"
on a machine without a driver or device. So the driver is asked first
(`gpu_facts.cuda_driver_has_devices`), and TensorFlow only when there is
a device. Checked both ways: the stderr of real imports in fresh processes
(whichever TensorFlow wheel is installed), and the probe's decisions with a
fake driver library (which any machine can run).
"""

import ctypes
import os
import re
import subprocess
import sys

import pytest

from grad_reverse._native import gpu_facts

# The record prefix, whose time and thread differ between runs: absl's
# ("E0000 00:00:1796139968.060622   12400 ", TensorFlow 2.16+) or TensorFlow
# 2.15's own ("2026-12-01 17:17:33.588786: ").
_PREFIX = re.compile(r"^([IWEF]\d{4} [\d:.]+\s+\d+ |\d{4}-\d\d-\d\d [\d:.]+: )")


def import_stderr(code: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # TensorFlow's default level
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    return [_PREFIX.sub("", line) for line in result.stderr.splitlines()]


def test_import_grad_reverse_adds_no_stderr_line_to_import_tensorflow():
    alone = import_stderr("import tensorflow")
    with_package = import_stderr("import tensorflow, grad_reverse")
    added = [line for line in with_package if line not in alone]
    assert added == [], "\n".join(added)


class FakeDriver:
    """A libcuda stand-in: cuInit's status and the device count are set per test."""

    def __init__(self, init_status: int, devices: int) -> None:
        self.init_status, self.devices, self.calls = init_status, devices, []

    def cuInit(self, flags):  # noqa: N802 - the driver API's name
        self.calls.append("cuInit")
        return self.init_status

    def cuDeviceGetCount(self, count):  # noqa: N802
        self.calls.append("cuDeviceGetCount")
        ctypes.cast(count, ctypes.POINTER(ctypes.c_int))[0] = self.devices
        return 0


def test_no_driver_library_means_no_devices():
    def load(name):
        raise OSError(f"{name}: cannot open shared object file")

    assert gpu_facts.cuda_driver_has_devices(load) is False


@pytest.mark.parametrize(
    "init_status, devices, expected",
    [
        (100, 0, False),  # CUDA_ERROR_NO_DEVICE
        (303, 0, False),  # the "UNKNOWN ERROR (303)" TensorFlow logs on a driverless container
        (0, 0, False),
        (0, 2, True),
    ],
)
def test_driver_probe_follows_cuinit_and_the_device_count(init_status, devices, expected):
    driver = FakeDriver(init_status, devices)
    assert gpu_facts.cuda_driver_has_devices(lambda name: driver) is expected
    assert driver.calls == (["cuInit"] if init_status else ["cuInit", "cuDeviceGetCount"])


def test_tensorflow_is_not_asked_for_gpus_when_the_driver_has_none(monkeypatch):
    import tensorflow as tf

    asked = []
    monkeypatch.setattr(tf.test, "is_built_with_cuda", lambda: True)
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: asked.append(kind) or [])
    assert gpu_facts.visible_gpus(driver_has_devices=lambda: False) == [] and asked == []
    assert gpu_facts.visible_gpus(driver_has_devices=lambda: True) == [] and asked == ["GPU"]
