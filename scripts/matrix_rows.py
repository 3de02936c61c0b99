"""A row of the TensorFlow version matrix (scripts/tensorflow_matrix.py): what
it runs, its results as read from pytest's JUnit file, and the rows as the
Markdown table the matrix prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree


@dataclass
class Row:
    release: str
    python: str
    library: str = "auto"  # GRAD_REVERSE_LIBRARY of the tests; the kind loaded goes in `loaded`
    loaded: str = ""
    result: str = "not run"  # passed | failed | no interpreter | no wheel | install failed | build failed
    tensorflow: str = ""
    python_version: str = ""
    install_seconds: float = 0.0
    build_seconds: float = 0.0
    test_seconds: float = 0.0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    xla_kernels: bool | None = None
    cuda_kernels: bool | None = None
    note: str = ""
    source_commit: str = ""
    skip_reasons: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def read_junit(path: Path, row: Row) -> None:
    suite = ElementTree.parse(path).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    for case in suite.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        if case.find("failure") is not None or case.find("error") is not None:
            row.failed += 1
            row.failures.append(name)
        elif (skip := case.find("skipped")) is not None:
            row.skipped += 1
            reason = (skip.get("message") or "").strip()
            row.skip_reasons[reason] = row.skip_reasons.get(reason, 0) + 1
        else:
            row.passed += 1


def markdown(rows: Sequence[Row]) -> str:
    lines = [
        "| TensorFlow | Python | library | result | build (wheel: install) s | passed | failed | skipped "
        "| XLA kernels | note |",
        "|---|---|---|---|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        xla = {True: "yes", False: "no", None: ""}[row.xla_kernels]
        library = row.loaded + (f" ({row.library})" if row.library != "auto" else "")
        lines.append(
            f"| {row.tensorflow or row.release} | {row.python_version or row.python} | {library} | "
            f"{row.result} | {row.build_seconds:.0f} | {row.passed} | {row.failed} | {row.skipped} | "
            f"{xla} | {row.note} |"
        )
    return "\n".join(lines) + "\n"
