"""scikit-build-core metadata provider: which TensorFlow to build against.

A custom op must be compiled against the exact TensorFlow it is loaded into.
This provider makes `pip install .` do that without a second TensorFlow:

* Build requirement (`get_requires_for_dynamic_metadata`): if the target
  environment already has `tensorflow` or `tensorflow-cpu` (or another
  TensorFlow distribution) of a supported release, nothing: CMake builds
  against that very installation (cmake/TensorFlowFromPython.cmake reads it
  through pip's isolation), so a reinstall neither downloads nor unpacks a
  second TensorFlow. Otherwise `tensorflow` of the newest supported series
  (DEFAULT_REQUIREMENT), which pip installs into the isolated build
  environment, and which CMake then uses.
* Runtime dependency (`dynamic_metadata`): the distribution and exact version
  that the build really used, so the installed package never pulls in a
  different TensorFlow next to the one it was compiled for.

GRAD_REVERSE_TENSORFLOW overrides the choice, e.g. "tensorflow-cpu==2.21.0".

The portable wheel (build_pip_pkg.sh sets GRAD_REVERSE_PORTABLE_WHEEL=1) is
the exception: it holds a library for every supported release, compiled
against TensorFlow installations that build_pip_pkg.sh prepares itself, so
the build environment needs no TensorFlow and the wheel requires none. It
cannot know whether its user runs `tensorflow` or `tensorflow-cpu` (or
`tensorflow[and-cuda]`), and requiring either would install a second
TensorFlow next to the other; `import grad_reverse` says clearly when none
is installed, or when the installed one is outside the range.

Supported releases: OLDEST_SUPPORTED to NEWEST_SUPPORTED (the ones the
version matrix, scripts/tensorflow_matrix.py, builds and tests). A TensorFlow
older than that stops the build at its start with a message that says so,
instead of a compiler error deep in the log, unless
GRAD_REVERSE_ALLOW_UNSUPPORTED_TENSORFLOW=1 asks to build anyway. A newer one
builds, with a warning: the stable-ABI library (cc/stable/, TensorFlow's C
API) always, the C++ library where it still compiles (CMake does not let its
failure fail the install). CMake asks the same question
(`python tensorflow_requirement.py check-version X.Y.Z`), so builds that
bypass pip get the same answer.

Before any of that, an OS the build has no branch for (anything but Linux)
stops it too: see supported_platforms.py.
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import site
import sys
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

# scikit-build-core imports this file from build_tools/ (provider-path), the
# tests and CMake by its path: either way, its sibling module sits beside it.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
from supported_platforms import UntestedPlatform, check_platform  # noqa: E402

OLDEST_SUPPORTED = (2, 15)
NEWEST_SUPPORTED = (2, 21)
DEFAULT_REQUIREMENT = "tensorflow~=2.21.0"  # the newest supported release
ALLOW_UNSUPPORTED_VARIABLE = "GRAD_REVERSE_ALLOW_UNSUPPORTED_TENSORFLOW"
PORTABLE_VARIABLE = "GRAD_REVERSE_PORTABLE_WHEEL"
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
# TensorFlow 2.16+ uses Keras 3; 2.15 pins its own Keras 2, which must stay.
KERAS_3_FROM = (2, 16)


class UnsupportedTensorFlow(RuntimeError):
    """The TensorFlow to build against is outside the supported range."""


def release(version: str) -> tuple[int, int]:
    """(major, minor) of a version string such as "2.18.1" or "2.21.0rc0"."""
    parts = version.split(".")
    try:
        return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or "x")
    except (IndexError, ValueError):
        raise UnsupportedTensorFlow(f"grad-reverse: cannot read the TensorFlow version {version!r}") from None


def _series(major_minor: tuple[int, int]) -> str:
    return "%d.%d" % major_minor


def unsupported_message(version: str, distribution: str = "TensorFlow") -> str | None:
    """Why `version` is older than the supported range, or None when it is not."""
    found = release(version)
    if found >= OLDEST_SUPPORTED:
        return None
    return (
        f"grad-reverse supports TensorFlow {_series(OLDEST_SUPPORTED)} to "
        f"{_series(NEWEST_SUPPORTED)} (and newer releases through its stable-ABI library); "
        f"this environment has {distribution} {version}, older than the oldest "
        f"supported release. Install a supported TensorFlow (for example "
        f'`pip install "tensorflow=={_series(NEWEST_SUPPORTED)}.*"`), or set '
        f"{ALLOW_UNSUPPORTED_VARIABLE}=1 to build against {version} anyway (untested: "
        f"the build or the tests may fail)."
    )


def newer_than_tested(version: str) -> bool:
    """Whether `version` is a release after NEWEST_SUPPORTED (a nightly included)."""
    return release(version) > NEWEST_SUPPORTED


def newer_message(version: str, distribution: str = "TensorFlow") -> str:
    return (
        f"grad-reverse was tested with TensorFlow {_series(OLDEST_SUPPORTED)} to "
        f"{_series(NEWEST_SUPPORTED)}; this environment has {distribution} {version}, newer "
        f"than the newest tested release. Building the stable-ABI library (TensorFlow's C API: "
        f"no XLA kernels, no CUDA backward kernel), and the C++ library where it still compiles "
        f'(docs/versions.md, "A TensorFlow newer than this release").'
    )


def check_supported(version: str, distribution: str = "TensorFlow") -> None:
    """Raises UnsupportedTensorFlow for a release older than the range, unless
    allowed; warns (stderr) for one newer than the range."""
    message = unsupported_message(version, distribution)
    if message is None:
        if newer_than_tested(version):
            print(f"\nWARNING: {newer_message(version, distribution)}\n", file=sys.stderr)
        return
    if os.environ.get(ALLOW_UNSUPPORTED_VARIABLE, "") not in ("", "0"):
        return
    raise UnsupportedTensorFlow(message)


def other_dependencies(version: str) -> list[str]:
    keras = ["keras>=3"] if release(version) >= KERAS_3_FROM else []
    return ["numpy", *keras]


def _normalize(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def find_tensorflow(paths: Iterable[str] | None = None) -> tuple[str, str] | None:
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


def portable() -> bool:
    """Whether this build makes the portable wheel (see the module's doc)."""
    return os.environ.get(PORTABLE_VARIABLE, "") not in ("", "0")


def build_requirement() -> str | None:
    """What pip must put into the build environment, or None when the target
    environment's own TensorFlow (supported) is what CMake builds against."""
    if portable():
        return None
    override = os.environ.get("GRAD_REVERSE_TENSORFLOW")
    if override:
        return override
    found = find_tensorflow(_target_environment_paths())
    if found is None:
        return DEFAULT_REQUIREMENT
    name, version = found
    check_supported(version, name)
    return None


def _stop(error: UnsupportedTensorFlow | UntestedPlatform) -> NoReturn:
    # pip shows a build backend's stderr; a traceback would bury the message.
    print(f"\nERROR: {error}\n", file=sys.stderr)
    raise SystemExit(1)


def get_requires_for_dynamic_metadata(settings: Mapping[str, Any] | None = None) -> list[str]:
    # The first hook a `pip install .` calls: the platform first, before
    # pip would download a TensorFlow to build against.
    try:
        check_platform()
        requirement = build_requirement()
    except (UntestedPlatform, UnsupportedTensorFlow) as error:
        _stop(error)
    return [requirement] if requirement else []


def dynamic_metadata(field: str, settings: Mapping[str, Any] | None = None, *_: Any) -> list[str]:
    if field != "dependencies":
        raise ValueError(f"tensorflow_requirement provides 'dependencies', not {field!r}")
    try:  # here too: `--no-build-isolation` may skip the hook above
        check_platform()
    except UntestedPlatform as error:
        _stop(error)
    if portable():
        return ["numpy"]
    # What CMake compiles against: the build environment's TensorFlow when pip
    # installed one there, else the target environment's (see
    # cmake/TensorFlowFromPython.cmake for the same order).
    found = find_tensorflow() or find_tensorflow(_target_environment_paths())
    if found is None:
        raise RuntimeError(
            "grad-reverse: no TensorFlow in the build environment; build with "
            "pip (which installs it) or install TensorFlow before `--no-build-isolation`"
        )
    name, version = found
    try:
        check_supported(version, name)  # also covers GRAD_REVERSE_TENSORFLOW
    except UnsupportedTensorFlow as error:
        _stop(error)
    return [f"{name}=={version}", *other_dependencies(version)]


def main(argv: list[str]) -> int:
    """`check-version X.Y.Z`, for CMake: exit 2 with the message on stderr when
    unsupported; a warning on stdout when allowed anyway; 3 with a warning on
    stdout for a release newer than the tested range (CMake then builds the
    C++ library as a best effort); 0 otherwise."""
    if len(argv) != 2 or argv[0] != "check-version":
        print("usage: tensorflow_requirement.py check-version X.Y.Z", file=sys.stderr)
        return 1
    version = argv[1]
    message = unsupported_message(version)
    if message is None and newer_than_tested(version):
        print(newer_message(version))
        return 3
    if message and os.environ.get(ALLOW_UNSUPPORTED_VARIABLE, "") in ("", "0"):
        print(message, file=sys.stderr)
        return 2
    if message:
        print(f"{message} ({ALLOW_UNSUPPORTED_VARIABLE} is set: building anyway)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
