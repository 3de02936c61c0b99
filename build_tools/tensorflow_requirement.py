"""scikit-build-core metadata provider: which TensorFlow to build against.

A custom op must be compiled against the exact TensorFlow it is loaded into.
This provider makes `pip install .` do that without a second TensorFlow:

* Build requirement (`get_requires_for_dynamic_metadata`): if the target
  environment already has `tensorflow` or `tensorflow-cpu` (or another
  TensorFlow distribution), the same distribution at the same version;
  otherwise `tensorflow` of the tested series (DEFAULT_REQUIREMENT). pip
  installs it into the isolated build environment (from its cache when it is
  already installed), and CMake asks that interpreter's `tf.sysconfig`.
* Runtime dependency (`dynamic_metadata`): the distribution and exact version
  that the build really used, so the installed package never pulls in a
  different TensorFlow next to the one it was compiled for.

GRAD_REVERSE_TENSORFLOW overrides the choice, e.g. "tensorflow-cpu==2.21.0".
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import site
import sys
from typing import Any, Iterable, Mapping, Optional

DEFAULT_REQUIREMENT = "tensorflow~=2.21.0"
# Distribution names that provide the `tensorflow` module, in order of preference.
DISTRIBUTIONS = (
    "tensorflow",
    "tensorflow-cpu",
    "tensorflow-gpu",
    "tensorflow-macos",
    "tensorflow-aarch64",
    "tensorflow-intel",
    "tf-nightly",
    "tf-nightly-cpu",
)
OTHER_DEPENDENCIES = ["numpy", "keras>=3"]


def _normalize(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def find_tensorflow(paths: Optional[Iterable[str]] = None) -> Optional[tuple[str, str]]:
    """(distribution name, version) of the TensorFlow installed on `paths`."""
    found = {}
    for dist in metadata.distributions(**({"path": list(paths)} if paths is not None else {})):
        name = _normalize(dist.metadata["Name"] or "")
        if name in DISTRIBUTIONS:
            found.setdefault(name, dist.version)
    for name in DISTRIBUTIONS:
        if name in found:
            return name, found[name]
    return None


def _target_environment_paths() -> list[str]:
    # pip's isolated build hides the target environment from sys.path, but
    # runs the same interpreter, so its prefix still names the target.
    paths = list(site.getsitepackages())
    if site.ENABLE_USER_SITE is not False:
        paths.append(site.getusersitepackages())
    return [p for p in paths if os.path.isdir(p)] + [p for p in sys.path if p]


def build_requirement() -> str:
    override = os.environ.get("GRAD_REVERSE_TENSORFLOW")
    if override:
        return override
    found = find_tensorflow(_target_environment_paths())
    if found is None:
        return DEFAULT_REQUIREMENT
    name, version = found
    return f"{name}=={version}"


def get_requires_for_dynamic_metadata(settings: Optional[Mapping[str, Any]] = None) -> list[str]:
    return [build_requirement()]


def dynamic_metadata(field: str, settings: Optional[Mapping[str, Any]] = None, *_: Any) -> list[str]:
    if field != "dependencies":
        raise ValueError(f"tensorflow_requirement provides 'dependencies', not {field!r}")
    found = find_tensorflow()  # the build environment: what CMake compiles against
    if found is None:
        raise RuntimeError(
            "grad-reverse: no TensorFlow in the build environment; build with "
            "pip (which installs it) or install TensorFlow before `--no-build-isolation`"
        )
    name, version = found
    return [f"{name}=={version}", *OTHER_DEPENDENCIES]
