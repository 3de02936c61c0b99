"""Applies one mutant at a time to a copy of the grad_reverse package (first
on PYTHONPATH) or of the source tree's cc/ (GRAD_REVERSE_SOURCE_DIR, for the
tests that build C++ from it) and runs its selected tests against the copies
in a pytest subprocess."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from mutation_lib.mutants import SOURCE, Mutant

REPO = Path(__file__).resolve().parents[2]
LIBRARY = "_grad_reverse_ops.so"
BUILD_INFO = "_build_info.json"
# One folder per TensorFlow release built for (see grad_reverse/_native/choice.py).
LIBRARY_GLOB = "_libs/tf*/" + LIBRARY


class CheckError(Exception):
    """The check itself cannot run (no built package, tests failing unmutated)."""


def find_package(explicit: str | None = None, library: bool = True) -> Path:
    """The grad_reverse package directory, without importing it (nor TensorFlow):
    `explicit`, else wherever this interpreter would import it from (an
    installed package, or a source tree on PYTHONPATH). It must hold the built library,
    unless `library` is False (Keras' JAX and PyTorch backends, which load none)."""
    if explicit:
        directory = Path(explicit).resolve()
    else:
        spec = importlib.util.find_spec("grad_reverse")
        if spec is None or not spec.submodule_search_locations:
            raise CheckError(
                "grad_reverse is not importable here: install it, or put the source "
                "tree's python/ on PYTHONPATH (after building the library in place)"
            )
        directory = Path(list(spec.submodule_search_locations)[0]).resolve()
    if library and not list(directory.glob(LIBRARY_GLOB)):
        raise CheckError(f"{directory} holds no {LIBRARY_GLOB}: build the library first")
    return directory


def build_record(package: Path) -> dict:
    """The build record of the package's library (of the last folder, when
    it holds several: the portable wheel)."""
    libraries = sorted(package.glob(LIBRARY_GLOB))
    return json.loads((libraries[-1].parent / BUILD_INFO).read_text()) if libraries else {}


def copy_package(package: Path, destination: Path) -> Path:
    """A copy of the package (built libraries included) under destination/grad_reverse."""
    copy = destination / "grad_reverse"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def copy_sources(destination: Path) -> Path:
    """A copy of the source tree's cc/ under destination/source; returns destination/source."""
    root = destination / "source"
    shutil.copytree(REPO / "cc", root / "cc")
    return root


@dataclass
class Copies:
    package: Path  # the package copy (destination/grad_reverse)
    sources: Path  # the source copy's root (holds cc/)

    def root_of(self, mutant: Mutant) -> Path:
        return self.sources if mutant.tree == SOURCE else self.package


def apply(mutant: Mutant, copy: Path) -> str | None:
    """Edits the copy (the package's, or the sources' for a SOURCE mutant);
    returns why it cannot (the code drifted), or None."""
    path = copy / mutant.file
    if not path.is_file():
        return f"{mutant.file} does not exist"
    text = path.read_text()
    for original, replacement in mutant.edits:
        found = text.count(original)
        if found != 1:
            return f"{mutant.file}: the original text occurs {found} times, not once: {original.strip()[:70]!r}"
        text = text.replace(original, replacement)
    path.write_text(text)
    return None


@dataclass
class TestRun:
    returncode: int
    failed: list[str]
    seconds: float
    output: str
    timed_out: bool = False


def cores() -> int:
    """The cores this process may run on (its affinity, where the system tells it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def test_files(mutant: Mutant) -> tuple[str, ...]:
    """The files of the mutant's selected tests, sorted."""
    return tuple(sorted({test.split("::")[0] for test in mutant.tests}))


def by_test_files(mutants: list[Mutant]) -> list[Mutant]:
    """The mutants grouped by the test files that must catch them (mutants of
    one group cost about the same: the same tests, the same fixtures), the
    groups with the most mutants first, each in the list's order. Started in
    this order, the long groups run while both jobs are busy and the single
    mutants fill the end, instead of one long group starting last."""
    groups: dict[tuple[str, ...], list[Mutant]] = {}
    for mutant in mutants:
        groups.setdefault(test_files(mutant), []).append(mutant)
    ordered = sorted(groups.values(), key=len, reverse=True)  # stable: equal sizes keep the list's order
    return [mutant for group in ordered for mutant in group]


def xdist_installed() -> bool:
    return importlib.util.find_spec("xdist") is not None


def run_tests(
    tests: tuple[str, ...],
    copies: Copies,
    timeout: float,
    stop_at_first: bool = True,
    conftest: bool = True,
    workers: int = 1,
) -> TestRun:
    """pytest on `tests` with the package copy first on PYTHONPATH, so it is
    the grad_reverse the tests import (ahead of an installed one), and the
    source copy as the tree that C++ tests build. conftest=False skips
    tests/conftest.py and its TensorFlow import (tests that only build and
    run C++ need neither). workers > 1: that many pytest-xdist workers, a
    file's tests on one (where pytest-xdist is installed; else one process)."""
    env = dict(
        os.environ,
        TF_CPP_MIN_LOG_LEVEL="3",
        GRAD_REVERSE_SOURCE_DIR=str(copies.sources),
        PYTHONPATH=os.pathsep.join([str(copies.package.parent), *filter(None, [os.environ.get("PYTHONPATH")])]),
    )
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-rfEs",
        "-p",
        "no:cacheprovider",
        "-W",
        "ignore",
        *(["-x"] if stop_at_first else []),
        *(["-n", str(workers), "--dist", "loadfile"] if workers > 1 and xdist_installed() else []),
        *([] if conftest else ["--noconftest"]),
        # Each set of copies has its own pytest temporary folder: with --jobs,
        # pytest sessions run side by side.
        f"--basetemp={copies.package.parent / 'pytest-tmp'}",
        *tests,
    ]
    start = time.monotonic()
    try:
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return TestRun(-1, [], time.monotonic() - start, "", timed_out=True)
    # FAILED only: an ERROR (a fixture or collection broke) is not a test
    # that caught the mutant.
    # A node id may hold spaces (parameter ids); pytest separates the message by " - ".
    failed = re.findall(r"^FAILED (.+?)(?: - .*)?$", done.stdout, flags=re.MULTILINE)
    return TestRun(done.returncode, failed, time.monotonic() - start, done.stdout + done.stderr)


def is_selected(node_id: str, selectors: tuple[str, ...]) -> bool:
    """Whether a failed test's node id is one of `selectors` (node ids or files), parameters aside."""
    return any(node_id == s or node_id.startswith((s + "[", s + "::")) for s in selectors)


def only_skipped(run: TestRun) -> str | None:
    """The skip reasons when pytest passed without running a test (all skipped), else None."""
    if run.returncode != 0 or re.search(r"\b\d+ passed", run.output):
        return None
    reasons = re.findall(r"^SKIPPED \[\d+\] \S+: (.*)$", run.output, flags=re.MULTILINE)
    return "; ".join(dict.fromkeys(reasons)) or "skipped"


def restore(package: Path, copies: Copies, mutant: Mutant) -> None:
    original = REPO if mutant.tree == SOURCE else package
    shutil.copyfile(original / mutant.file, copies.root_of(mutant) / mutant.file)
