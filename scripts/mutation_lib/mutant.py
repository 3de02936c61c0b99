"""A mutant: one promise of the package, the smallest edit that breaks it, and
the tests that must fail when it is applied (mutants.py and the
mutants_*.py files it assembles hold the curated ones)."""

from __future__ import annotations

from dataclasses import dataclass

PACKAGE = "package"  # a file of the grad_reverse package (built libraries included)
SOURCE = "source"  # a file of the source tree's cc/, which the selected tests build
# (they run without tests/conftest.py, so without TensorFlow)


@dataclass(frozen=True)
class Mutant:
    name: str
    promise: str  # what the package promises that this edit breaks
    file: str  # relative to the grad_reverse package directory, or to the repository for SOURCE
    edits: tuple[tuple[str, str], ...]  # (original text, replacement), applied in order
    tests: tuple[str, ...]  # pytest node ids (or files) that must fail
    needs: str = ""  # a build-record key that must be true for the edit to change anything
    pending: str = ""  # a known survivor: why, and what will kill it
    tree: str = PACKAGE
    # The Keras backend whose own code the edit changes ("jax", "torch"): checked only by a run
    # under KERAS_BACKEND=that (.ci/run's step 5b, --without-library), skipped by the others.
    backend: str = ""


T = "tests/"
