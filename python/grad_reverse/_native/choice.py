"""Which native op library this process loads, chosen once, at import.

This is the one place that knows where the libraries live. Two kinds, each in
its folder of `_libs/` with its build record:

* per-release C++ libraries, `_libs/tf<major>.<minor>/`: a custom op written
  against TensorFlow's C++ API is bound to the ABI of one minor release, so a
  source build (`pip install .`) holds the one of the TensorFlow it was built
  against, the portable wheel (build_pip_pkg.sh) one for each supported
  release. A patch release loads its minor's library.
* the stable-ABI library, `_libs/stable/` (cc/stable/): written against
  TensorFlow's C API only, which does not move between releases, so it loads
  into every TensorFlow from the oldest supported release on, newer ones
  included; it has no XLA and no CUDA backward kernels.

`settings.library_mode()` (GRAD_REVERSE_LIBRARY) chooses: `auto` (the default)
takes the running release's own library where this installation holds one,
else the stable one; `release` and `stable` take only that kind. Loading the
chosen library and checking it matches this TensorFlow is `loader`'s job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from grad_reverse._native import settings
from grad_reverse._native.settings import AUTO, LIBRARY_VARIABLE, RELEASE, STABLE

# grad_reverse/, this file's folder's parent.
PACKAGE_DIR = Path(__file__).resolve().parents[1]
LIBRARIES_DIR = PACKAGE_DIR / "_libs"
LIBRARY_NAME = "_grad_reverse_ops.so"
BUILD_INFO_NAME = "_build_info.json"
# The releases grad-reverse supports (build_tools/tensorflow_requirement.py
# holds the same range for the build; tests/op/test_loader.py checks they agree).
SUPPORTED = ((2, 15), (2, 21))
OLDEST, NEWEST = ("%d.%d" % release for release in SUPPORTED)
BUILD_HINT = (
    "Build and install it from the grad-reverse source tree with "
    "`pip install .` (it compiles against the TensorFlow installed in that "
    "environment)."
)


def release_of(version: str) -> tuple[int, int] | None:
    """(2, 21) for "2.21.0", "2.21.0rc1" or "2.21"; None if it has no minor."""
    match = re.match(r"\s*(\d+)\.(\d+)", version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def series(version: str) -> str:
    """ "2.21" for "2.21.0", "2.21.0rc1" or "2.21"; the version itself if it has no minor."""
    release = release_of(version)
    return "%d.%d" % release if release else str(version)


def releases_held(libraries_dir: Path = LIBRARIES_DIR) -> list[str]:
    """The TensorFlow minor releases this installation holds a library for, oldest first."""
    found = []
    if libraries_dir.is_dir():
        for folder in libraries_dir.iterdir():
            match = re.fullmatch(r"tf(\d+)\.(\d+)", folder.name)
            if match and (folder / LIBRARY_NAME).is_file():
                found.append((int(match.group(1)), int(match.group(2))))
    return [f"{major}.{minor}" for major, minor in sorted(found)]


def library_dir(libraries_dir: Path = LIBRARIES_DIR, running: str | None = None) -> Path:
    """The folder of the library for the running TensorFlow, or ImportError
    naming the running release and the ones this installation holds."""
    running = running or running_tensorflow()
    folder = libraries_dir / f"tf{series(running)}"
    if folder.is_dir():
        return folder
    held = releases_held(libraries_dir)
    if not held:
        raise ImportError(f"grad_reverse: no native op library was found in {libraries_dir}. {BUILD_HINT}")
    wanted, release = series(running), release_of(running)
    if release is not None and SUPPORTED[0] <= release <= SUPPORTED[1]:
        other_way = (
            ", or build grad-reverse from source against this TensorFlow "
            "(`pip install --no-deps --force-reinstall .` in the grad-reverse source tree)"
        )
    elif release is not None and release > SUPPORTED[1]:
        other_way = (
            f"; TensorFlow {wanted} is newer than the releases with C++ libraries, and is served by "
            f"the stable-ABI library: unset {LIBRARY_VARIABLE} (auto) where the installation holds it"
        )
    else:
        other_way = f"; TensorFlow {wanted} is older than the supported range"
    choices = " or ".join(held) if len(held) < 3 else f"{held[0]} to {held[-1]}"
    raise ImportError(
        f"grad_reverse: this process runs TensorFlow {running}, but this installation of "
        f"grad-reverse holds op libraries for TensorFlow {', '.join(held)} only (in "
        f"{libraries_dir}); grad-reverse has C++ libraries for TensorFlow {OLDEST} to {NEWEST} (and its "
        f"stable-ABI library for any later release), and a C++ custom "
        f"op must be compiled for the TensorFlow minor release it is loaded into. Install "
        f'TensorFlow {choices} (for example `pip install "tensorflow-cpu=={held[-1]}.*"`)'
        f"{other_way}."
    )


STABLE_DIR_NAME = "stable"
STABLE_COSTS = (
    "no XLA kernels (XLA-compiled functions run the pure-Python version, which XLA compiles to "
    "the same HLO) and no CUDA backward kernel (on a GPU the backward runs stock TensorFlow ops, "
    "with the same results); the CPU kernels and the GPU forward are the same"
)


@dataclass(frozen=True)
class Choice:
    """The library to load: its folder, its kind (RELEASE or STABLE), why it
    was chosen (for `python -m grad_reverse info`), and what to warn at
    import (None when nothing)."""

    directory: Path
    kind: str
    reason: str
    warning: str | None = None
    # In `auto`, for a C++ library: the stable-ABI library's folder, loaded
    # instead when the C++ one does not load for an ABI reason (loader).
    fallback: Path | None = None


def choose_library(libraries_dir: Path = LIBRARIES_DIR, running: str | None = None, mode: str | None = None) -> Choice:
    """Which library this process loads, or ImportError saying why none can be.

    `running` is the TensorFlow version (None: this process's); `mode` is
    GRAD_REVERSE_LIBRARY's value (None: `settings.library_mode()`)."""
    running = running or running_tensorflow()
    mode = settings.parse_library_mode(settings.library_mode() if mode is None else mode)
    stable = libraries_dir / STABLE_DIR_NAME
    stable_held = has_stable(libraries_dir)
    release = release_of(running)
    if release is not None and release < SUPPORTED[0]:
        raise ImportError(
            f"grad_reverse: this process runs TensorFlow {running}; grad-reverse supports TensorFlow "
            f"{OLDEST} and newer (tested: {OLDEST} to "
            f"{NEWEST}). Install a newer TensorFlow (for example "
            f'`pip install "tensorflow-cpu=={NEWEST}.*"`).'
        )
    if mode == STABLE:
        if not stable_held:
            raise ImportError(
                f"grad_reverse: {LIBRARY_VARIABLE}={STABLE}, but this installation has no "
                f"stable-ABI library ({stable / LIBRARY_NAME}). Unset it, or reinstall grad-reverse "
                f"(its wheel and a source build both hold one)."
            )
        return Choice(stable, STABLE, f"chosen by {LIBRARY_VARIABLE}={STABLE}")
    own = libraries_dir / f"tf{series(running)}"
    if mode == RELEASE or own.is_dir() or not stable_held:
        directory = library_dir(libraries_dir, running)
        why = (
            f"chosen by {LIBRARY_VARIABLE}={RELEASE}"
            if mode == RELEASE
            else (f"the C++ library built for TensorFlow {series(running)}, the running release")
        )
        return Choice(directory, RELEASE, why, fallback=stable if mode == AUTO and stable_held else None)
    held = releases_held(libraries_dir)
    held_text = f"it holds C++ libraries for TensorFlow {', '.join(held)}" if held else "it holds no C++ library"
    if release is not None and release > SUPPORTED[1]:
        reason = (
            f"TensorFlow {running} is newer than the releases this grad-reverse was built and "
            f"tested for ({OLDEST} to {NEWEST})"
        )
    else:
        reason = f"this installation has no C++ library for TensorFlow {series(running)} ({held_text})"
    warning = (
        f"grad_reverse: {reason}: using its stable-ABI library (TensorFlow's C API, one build for "
        f"every release). What that costs: {STABLE_COSTS}. `python -m grad_reverse info` says what "
        f"runs where; set {LIBRARY_VARIABLE}={STABLE} to choose it explicitly and silence this warning."
    )
    return Choice(stable, STABLE, reason, warning)


def has_stable(libraries_dir: Path = LIBRARIES_DIR) -> bool:
    """Whether this installation holds the stable-ABI library."""
    return (libraries_dir / STABLE_DIR_NAME / LIBRARY_NAME).is_file()


_chosen: Choice | None = None


def chosen() -> Choice:
    """The choice for this process, made once (GRAD_REVERSE_LIBRARY is read
    once: a loaded library stays loaded)."""
    global _chosen
    if _chosen is None:
        _chosen = choose_library()
    return _chosen


def fall_back_to_stable(choice: Choice, symbol: str) -> Choice:
    """The stable-ABI library in place of `choice`, a C++ library that did
    not load because this TensorFlow does not define `symbol`; it becomes
    this process's choice (what `info` reports)."""
    global _chosen
    assert choice.fallback is not None, "only an `auto` choice with a stable library falls back"
    running = running_tensorflow()
    reason = (
        f"the C++ library for TensorFlow {series(running)} does not load into TensorFlow {running} "
        f"(undefined symbol {symbol})"
    )
    warning = (
        f"grad_reverse: {reason}: this TensorFlow does not define a C++ symbol that library was "
        f"linked against (a patch release or a rebuilt TensorFlow that moved it). Using the stable-ABI "
        f"library instead. What that costs: {STABLE_COSTS}. Rebuild grad-reverse from source against "
        f"this TensorFlow (`pip install --force-reinstall --no-deps .`) for a C++ library that loads; "
        f"set {LIBRARY_VARIABLE}={RELEASE} to make this an error, or {LIBRARY_VARIABLE}={STABLE} to "
        f"choose the stable library and silence this warning."
    )
    _chosen = Choice(choice.fallback, STABLE, reason, warning)
    return _chosen


def running_tensorflow() -> str:
    """The version of the TensorFlow this process runs."""
    import tensorflow as tf

    return tf.__version__
