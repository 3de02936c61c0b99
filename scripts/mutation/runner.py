"""Applies one mutant at a time to a copy of the grad_reverse package and runs
its selected tests against the copy (first on PYTHONPATH) in a pytest subprocess."""

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
from typing import Optional

from mutation.mutants import Mutant

REPO = Path(__file__).resolve().parents[2]
LIBRARY = "_grad_reverse_ops.so"
BUILD_INFO = "_build_info.json"
# One folder per TensorFlow release built for (see grad_reverse/_loader.py).
LIBRARY_GLOB = "_libs/tf*/" + LIBRARY


class CheckError(Exception):
    """The check itself cannot run (no built package, tests failing unmutated)."""


def find_package(explicit: Optional[str] = None) -> Path:
    """The grad_reverse package directory, without importing it (nor TensorFlow):
    `explicit`, else wherever this interpreter would import it from (an
    installed package, or a source tree on PYTHONPATH). It must hold the built library."""
    if explicit:
        directory = Path(explicit).resolve()
    else:
        spec = importlib.util.find_spec("grad_reverse")
        if spec is None or not spec.submodule_search_locations:
            raise CheckError("grad_reverse is not importable here: install it, or put the source "
                             "tree's python/ on PYTHONPATH (after building the library in place)")
        directory = Path(list(spec.submodule_search_locations)[0]).resolve()
    if not list(directory.glob(LIBRARY_GLOB)):
        raise CheckError(f"{directory} holds no {LIBRARY_GLOB}: build the library first")
    return directory


def build_record(package: Path) -> dict:
    """The build record of the package's library (of the last folder, when
    it holds several: the portable wheel)."""
    return json.loads((sorted(package.glob(LIBRARY_GLOB))[-1].parent / BUILD_INFO).read_text())


def copy_package(package: Path, destination: Path) -> Path:
    """A copy of the package (built libraries included) under destination/grad_reverse."""
    copy = destination / "grad_reverse"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def apply(mutant: Mutant, copy: Path) -> Optional[str]:
    """Edits the copy; returns why it cannot (the code drifted), or None."""
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


def run_tests(tests: tuple[str, ...], copy_root: Path, timeout: float, stop_at_first: bool = True) -> TestRun:
    """pytest on `tests` with the copy first on PYTHONPATH, so it is the
    grad_reverse the tests import (ahead of an installed one)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join([str(copy_root), *filter(None, [os.environ.get("PYTHONPATH")])]))
    command = [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", "-W", "ignore",
               *(["-x"] if stop_at_first else []), *tests]
    start = time.monotonic()
    try:
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return TestRun(-1, [], time.monotonic() - start, "", timed_out=True)
    # FAILED only: an ERROR (a fixture or collection broke) is not a test
    # that caught the mutant.
    failed = re.findall(r"^FAILED (\S+)", done.stdout, flags=re.MULTILINE)
    return TestRun(done.returncode, failed, time.monotonic() - start, done.stdout + done.stderr)


def is_selected(node_id: str, selectors: tuple[str, ...]) -> bool:
    """Whether a failed test's node id is one of `selectors` (node ids or files), parameters aside."""
    return any(node_id == s or node_id.startswith((s + "[", s + "::")) for s in selectors)


def restore(package: Path, copy: Path, mutant: Mutant) -> None:
    shutil.copyfile(package / mutant.file, copy / mutant.file)
