#!/usr/bin/env python3
"""The supported-versions matrix: build and test grad-reverse against each
TensorFlow release, as a new user would, and write the result as a table.

For each row (a TensorFlow release and a Python), in a fresh virtual
environment: `pip install "tensorflow-cpu==R.*"`, then the README's
`pip install ".[test]"` from a clean copy of this source tree (so the build
pins the same TensorFlow), then `pytest -m "not slow"`. It writes, under
--out, `matrix.md` (a Markdown table), `matrix.json` (one object per row:
release, Python, build seconds, passed/failed/skipped, XLA kernels in the
build, result, skip reasons) and a log per row.

  python scripts/tensorflow_matrix.py                  # every supported row
  python scripts/tensorflow_matrix.py 2.18 2.21@3.13   # chosen rows only
  python scripts/tensorflow_matrix.py --python 3.12 2.20
  python scripts/tensorflow_matrix.py --wheel dist/grad_reverse-*_x86_64.whl
  python scripts/tensorflow_matrix.py --wheel WHEEL --tests tests/op/test_op.py tests/op/test_xla.py

With --wheel, each row installs that one wheel (`pip install "WHEEL[test]"`,
no build: the portable wheel of build_pip_pkg.sh holds a library for every
supported release) instead of building the source tree, and both the install
and the tests run with a PATH that holds no C++ compiler, CMake or nvcc
(scripts/no_compiler_path.py), as on a user's machine without them.

A row is RELEASE[@PYTHON]; without @PYTHON it uses --python (default 3.11).
RELEASE `nightly` installs the tf-nightly that build_tools/tf_nightly.txt pins
(a stand-in for the next release: bumped by a commit, never "latest", so a
run is reproducible), `rc` the release candidate (or the final release once
it is out) that build_tools/tf_release_candidate.txt pins; a release
installs `tensorflow-cpu==RELEASE.*`.
--stable-tests runs chosen tests a second time in each row's environment
with GRAD_REVERSE_LIBRARY=stable (the stable-ABI library forced where the
wheel holds the release's own library too): one more table row each.
A Python is a version (found as pythonX.Y on PATH or under pyenv) or a path.
Rows whose interpreter is missing, or for which TensorFlow publishes no wheel,
are reported as such, not as failures. Exit status: 0 when no row failed
(with --require-pass, only when every row passed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from no_compiler_path import no_compiler_path

# Beside this file (the script's folder is on sys.path when it runs, and
# pyproject's pytest `pythonpath` names it for the tests).
from matrix_rows import Row, markdown, read_junit

ROOT = Path(__file__).resolve().parents[1]


def find_python(version: str) -> str | None:
    """An interpreter for `version` ("3.12"), as the portable wheel's build finds
    one (build_tools/find_python.py), or None."""
    found = subprocess.run(
        [sys.executable, str(ROOT / "build_tools" / "find_python.py"), version], capture_output=True, text=True
    )
    path = found.stdout.strip()
    return path if found.returncode == 0 and path else None


RELEASES = ("2.15", "2.16", "2.17", "2.18", "2.19", "2.20", "2.21")
EXTRA_PYTHON_ROWS = ("2.21@3.10", "2.21@3.12", "2.21@3.13")
DEFAULT_PYTHON = "3.11"
NIGHTLY = "nightly"
NIGHTLY_PIN = ROOT / "build_tools" / "tf_nightly.txt"
RELEASE_CANDIDATE = "rc"
RELEASE_CANDIDATE_PIN = ROOT / "build_tools" / "tf_release_candidate.txt"
PINNED = {NIGHTLY: NIGHTLY_PIN, RELEASE_CANDIDATE: RELEASE_CANDIDATE_PIN}
TENSORFLOW_DISTRIBUTIONS = ("tensorflow-cpu", "tensorflow", "tf-nightly", "tf-nightly-cpu")
NO_WHEEL = re.compile(
    r"No matching distribution found for (tensorflow-cpu|tf-nightly)|"
    r"Could not find a version that satisfies the requirement (tensorflow-cpu|tf-nightly)"
)


def parse_row(text: str, default_python: str) -> Row:
    release, _, python = text.partition("@")
    if not re.fullmatch(r"2\.\d+", release) and release not in PINNED:
        raise argparse.ArgumentTypeError(
            f"a row is RELEASE[@PYTHON] such as 2.18, 2.21@3.13, {NIGHTLY} or {RELEASE_CANDIDATE}, got {text!r}"
        )
    return Row(release=release, python=python or default_python)


def copy_source(destination: Path) -> str:
    """The tracked and untracked-but-not-ignored files of this tree (what a
    fresh clone with local edits holds), so build folders never leak in.
    Returns the commit, with "+dirty" when there are local changes. Outside a
    git checkout (an unpacked sdist), the tree less build outputs, commit
    "unknown"."""
    listing = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True
    )
    if listing.returncode != 0:
        shutil.copytree(
            ROOT,
            destination,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns(
                ".git", "build", "build-*", "dist", ".venv*", "__pycache__", "*.so", "*.egg-info"
            ),
        )
        return "unknown"
    listed = listing.stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
    return commit + ("+dirty" if dirty.strip() else "")


class Runner:
    """Runs one row's commands, appending their output to the row's log."""

    def __init__(self, log: Path, cwd: Path, env: dict[str, str]) -> None:
        self.log, self.cwd, self.env = log, cwd, env

    def __call__(self, *command: str, timeout: int = 3600) -> tuple[int, str, float]:
        start = time.monotonic()
        with self.log.open("a") as log:
            log.write(f"\n$ {' '.join(command)}\n")
            log.flush()
            try:
                done = subprocess.run(
                    command,
                    cwd=self.cwd,
                    env=self.env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    timeout=timeout,
                )
                code, output = done.returncode, done.stdout
            except subprocess.TimeoutExpired as error:
                code, output = -1, f"{error.stdout or ''}\n[timed out after {timeout} s]"
            log.write(output)
        return code, output, time.monotonic() - start


def tensorflow_requirement(release: str) -> str:
    """What pip installs for a row's release."""
    if release in PINNED:
        return PINNED[release].read_text().split("#")[0].strip()
    return f"tensorflow-cpu=={release}.*"


def run_tests(row: Row, run: Runner, python: str, work: Path, source: Path, tests: Sequence[str]) -> None:
    """Runs `tests` in the row's environment (GRAD_REVERSE_LIBRARY=row.library)
    and fills in the row's library, counts and result."""
    env = dict(run.env, GRAD_REVERSE_LIBRARY=row.library)
    tests_run = Runner(run.log, run.cwd, env)
    record = subprocess.run(
        [python, "-c", "import json, grad_reverse; print(json.dumps(grad_reverse.BUILD_INFO))"],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
    )
    if record.returncode == 0:
        info = json.loads(record.stdout.strip().splitlines()[-1])
        row.loaded = info.get("library", {}).get("kind", "")
        row.xla_kernels, row.cuda_kernels = bool(info.get("xla")), bool(info.get("cuda"))
        if not row.xla_kernels:
            row.note = f"no XLA kernels: {info.get('xla_note') or 'not built'}"
    junit = work / f"junit-{row.library}.xml"
    code, output, row.test_seconds = tests_run(
        python,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        "not slow",
        "-rs",
        f"--junitxml={junit}",
        *(str(source / t) for t in tests),
    )
    if junit.is_file():
        read_junit(junit, row)
    row.result = "passed" if code == 0 and row.failed == 0 else "failed"
    if row.result == "failed" and not junit.is_file():
        row.note = "pytest did not finish: see the log"


def run_row(
    row: Row,
    out: Path,
    source: Path,
    keep: bool,
    wheel: Path | None = None,
    tests: Sequence[str] = ("tests",),
    stable_tests: Sequence[str] = (),
) -> list[Row]:
    """The row, and with `stable_tests` a second row for them under the stable library."""
    rows = [row]
    run_environment(rows, out, source, keep, wheel, tests, stable_tests)
    return rows


def run_environment(
    rows: list[Row],
    out: Path,
    source: Path,
    keep: bool,
    wheel: Path | None,
    tests: Sequence[str],
    stable_tests: Sequence[str],
) -> None:
    row = rows[0]
    interpreter = find_python(row.python)
    if interpreter is None:
        row.result, row.note = "no interpreter", f"no Python {row.python} on this machine"
        return
    work = Path(tempfile.mkdtemp(prefix=f"matrix-{row.release}-py{row.python}-"))
    log = out / f"tf{row.release}-py{row.python}.log"
    log.write_text("")
    # The build's settings stay out of a row; what the tests should expect
    # of the build (GRAD_REVERSE_EXPECT_*), and another TensorFlow's Python
    # to move a SavedModel to and from, go in.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH", "GRAD_REVERSE_"))
        or k.startswith(("GRAD_REVERSE_EXPECT_", "GRAD_REVERSE_OTHER_TENSORFLOW_PYTHON"))
    }
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    run = Runner(log, source, env)
    try:
        venv = work / "venv"
        code, output, _ = run(interpreter, "-m", "venv", str(venv))
        python = str(venv / "bin" / "python")
        row.python_version = subprocess.run(
            [python, "-c", "import platform; print(platform.python_version())"], capture_output=True, text=True
        ).stdout.strip()
        run(python, "-m", "pip", "install", "-q", "--upgrade", "pip")
        requirement = tensorflow_requirement(row.release)
        code, output, row.install_seconds = run(python, "-m", "pip", "install", requirement)
        if code != 0:
            row.result = "no wheel" if NO_WHEEL.search(output) else "install failed"
            row.note = (
                f"TensorFlow {row.release} publishes no wheel ({requirement}) for Python {row.python_version}"
                if row.result == "no wheel"
                else f"pip install {requirement} failed: see the log"
            )
            return
        row.tensorflow = subprocess.run(
            [
                python,
                "-c",
                "import importlib.metadata as m\nfor name in %r:\n    try:\n        print(m.version(name)); break\n"
                "    except m.PackageNotFoundError: pass" % (TENSORFLOW_DISTRIBUTIONS,),
            ],
            capture_output=True,
            text=True,
        ).stdout.strip()
        if wheel is not None:
            # The wheel alone first (its install time is the row's "build"
            # time), then the test extra's packages.
            run.env = dict(env, PATH=no_compiler_path(work / "bin", venv / "bin"))
            code, output, row.build_seconds = run(python, "-m", "pip", "install", "--no-deps", str(wheel))
            if code == 0:
                code, output, _ = run(python, "-m", "pip", "install", f"{wheel}[test]")
            failure = f"pip install {wheel.name} failed: see the log"
        else:
            code, output, row.build_seconds = run(python, "-m", "pip", "install", f"{source}[test]")
            failure = "pip install .[test] failed: see the log"
        if code != 0:
            row.result, row.note = "build failed", failure
            return
        run_tests(row, run, python, work, source, tests)
        if stable_tests:
            stable = Row(
                row.release,
                row.python,
                library="stable",
                tensorflow=row.tensorflow,
                python_version=row.python_version,
                source_commit=row.source_commit,
            )
            rows.append(stable)
            run_tests(stable, run, python, work, source, stable_tests)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "rows",
        nargs="*",
        help=f"RELEASE[@PYTHON] (default: every release on --python, plus {', '.join(EXTRA_PYTHON_ROWS)})",
    )
    parser.add_argument(
        "--python", default=DEFAULT_PYTHON, help="Python for rows without @PYTHON (default %(default)s)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "build-matrix", help="output folder (default %(default)s)")
    parser.add_argument("--keep-venvs", action="store_true", help="keep each row's virtual environment")
    parser.add_argument("--wheel", type=Path, help="install this wheel in each row instead of building the source tree")
    parser.add_argument(
        "--tests",
        nargs="+",
        default=["tests"],
        metavar="PATH",
        help="test files or folders to run, relative to the source tree (default: tests)",
    )
    parser.add_argument(
        "--library",
        choices=("auto", "release", "stable"),
        default="auto",
        help="GRAD_REVERSE_LIBRARY for the tests (default %(default)s)",
    )
    parser.add_argument(
        "--stable-tests",
        nargs="+",
        default=[],
        metavar="PATH",
        help="run these again in each row with GRAD_REVERSE_LIBRARY=stable (a row of their own)",
    )
    parser.add_argument(
        "--require-pass",
        action="store_true",
        help="exit 1 unless every row passed (CI: a missing interpreter or wheel is a failure too)",
    )
    args = parser.parse_args(argv)
    texts = args.rows or [*RELEASES, *EXTRA_PYTHON_ROWS]
    try:
        rows = [parse_row(text, args.python) for text in texts]
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="matrix-source-") as source:
        commit = copy_source(Path(source))
        done: list[Row] = []
        for row in rows:
            row.source_commit, row.library = commit, args.library
            print(f"TensorFlow {row.release}, Python {row.python} ...", flush=True)
            for result in run_row(
                row,
                args.out,
                Path(source),
                args.keep_venvs,
                args.wheel and args.wheel.resolve(),
                args.tests,
                args.stable_tests,
            ):
                done.append(result)
                print(
                    f"  {result.loaded or result.library} library: {result.result}: {result.passed} passed, "
                    f"{result.failed} failed, {result.skipped} skipped, build {result.build_seconds:.0f} s "
                    f"{result.note}",
                    flush=True,
                )
            (args.out / "matrix.json").write_text(json.dumps([asdict(r) for r in done], indent=2) + "\n")
            (args.out / "matrix.md").write_text(markdown(done))
    rows = done
    print(markdown(rows))
    if args.require_pass:
        return 0 if all(row.result == "passed" for row in rows) else 1
    return 0 if all(row.result not in ("failed", "build failed", "install failed") for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
