"""The CUDA version a GPU build of TensorFlow was built with, for the build
record and the toolkit check (cmake/TensorFlowFromPython.cmake runs it in the
TensorFlow's own Python).

TensorFlow up to 2.21 says it in `tf.sysconfig.get_build_info()["cuda_version"]`;
2.22 keeps only `is_cuda_build` there. Then the CUDA runtime its wheel asks
for tells it (the `nvidia-cuda-runtime-cu12>=12.5.82` requirement of its
`and-cuda` extra: the oldest runtime it runs with), else the one installed
next to it; else "unknown". A CPU build gives "".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from importlib import metadata

TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tf-nightly", "tf-nightly-cpu")
_RUNTIME = re.compile(r"^nvidia[-_]cuda[-_]runtime[-_]cu(\d+)\s*(\S*)", re.IGNORECASE)
UNKNOWN = "unknown"


def cuda_version(build_info: Mapping[str, object], requirements: Iterable[str], installed: Mapping[str, str]) -> str:
    """`build_info`: tf.sysconfig.get_build_info(); `requirements`: the
    TensorFlow distribution's Requires-Dist lines; `installed`: {distribution
    name: version} of the nvidia-cuda-runtime packages installed."""
    if build_info.get("cuda_version"):
        return str(build_info["cuda_version"])
    if not build_info.get("is_cuda_build"):
        return ""
    for requirement in requirements:
        match = _RUNTIME.match(requirement)
        if match:
            lower = re.search(r">=\s*(\d+(?:\.\d+)*)", match.group(2))
            return lower.group(1) if lower else match.group(1)
    for name, version in sorted(installed.items()):
        if _RUNTIME.match(name):
            return version
    return UNKNOWN


def _requirements() -> list[str]:
    for name in TENSORFLOW_DISTRIBUTIONS:
        try:
            return list(metadata.requires(name) or [])
        except metadata.PackageNotFoundError:
            continue
    return []


def _installed_runtimes() -> dict[str, str]:
    found = {}
    for distribution in metadata.distributions():
        name: str | None = distribution.metadata["Name"]
        if name and _RUNTIME.match(name):
            found[name] = distribution.version
    return found


def tensorflow_cuda_version() -> str:
    """The running Python's TensorFlow's CUDA version ("" for a CPU build)."""
    import tensorflow as tf

    return cuda_version(tf.sysconfig.get_build_info(), _requirements(), _installed_runtimes())


if __name__ == "__main__":
    print(tensorflow_cuda_version())
