#!/usr/bin/env python3
"""The curated mutation check: every promise of grad_reverse fails a test when it is broken.

For each mutant in scripts/mutation_lib/mutants.py: copy the package (built
libraries included) and the source tree's cc/, apply the mutant's edit to
the copy (the package's, or cc/'s for a source mutant, whose tests build a
C++ program from it), run the mutant's selected tests against it, and
require them to fail. Last, every test that failed under a mutant runs
against the unmutated copies and must pass, so a kill is the mutant's doing.
Only those tests: a selected test that passed under its mutant proves
nothing either way (the mutant is a survivor), and rerunning every selected
test cost a quarter of the check.

Verdicts: killed (one of its selected tests failed), SURVIVED (they passed:
a promise no test guards), INCONCLUSIVE (a timeout, or pytest errors instead
of a selected test failing), DRIFTED (the original text is not in the code
any more: rewrite the mutant), skipped (the edit changes nothing in this
build, e.g. an XLA mutant where the build has no XLA kernels; or a source
mutant whose tests all skipped, e.g. without the CUDA headers), pending (a
known survivor, listed with what will kill it). Exit 0 only when no mutant
survived, drifted or was inconclusive, and no pending one was killed (then
its pending mark is stale).

Usage: python scripts/mutation_check.py [--list] [--only NAME ...] [--package-dir DIR] [--jobs N] [--without-library]
(--without-library: with KERAS_BACKEND=jax or torch, the models' mutants whose tests run there;
--jobs: mutants tested at once, by default one per core.)
The package is found without importing it: an installed grad_reverse, or a
source tree's python/ on PYTHONPATH with the library built in place.
"""

from __future__ import annotations

import argparse
import os
import queue
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

# mutation_lib/ sits beside this script, whose folder Python puts on sys.path.
from mutation_lib import runner
from mutation_lib.mutants import MUTANTS, SOURCE, Mutant

TIMEOUT_S = 300  # per pytest run; a mutant whose tests hang past it is INCONCLUSIVE, not killed
# The unmutated rerun runs every killing test in one pytest: several times one
# mutant's share, and a loaded 2-core machine stretched such a run past 300 s.
RERUN_TIMEOUT_S = 1500


def print_list(mutants: list[Mutant]) -> None:
    for number, mutant in enumerate(mutants, 1):
        mark = "  [PENDING: " + mutant.pending + "]" if mutant.pending else ""
        print(f"{number:2}. {mutant.name}: {mutant.promise}{mark}")
        print(f"      {mutant.file}; must fail: {', '.join(t.split('::')[-1] for t in mutant.tests)}")


def verdict(mutant: Mutant, package: Path, copies: runner.Copies, build: dict) -> tuple[str, bool, list[str]]:
    """(verdict line, whether it is a failure of the check, the selected tests
    that failed when it is killed: the evidence, rerun unmutated at the end)."""
    if mutant.needs and not build.get(mutant.needs):
        return f"skipped (the build record has no {mutant.needs!r}: the edit would change nothing)", False, []
    running = os.environ.get("KERAS_BACKEND", "tensorflow")
    if mutant.backend and mutant.backend != running:
        return f"skipped (it edits {mutant.backend}'s step; this run's Keras backend is {running})", False, []
    drift = runner.apply(mutant, copies.root_of(mutant))
    if drift:
        return f"DRIFTED: {drift}", True, []
    try:
        # A source mutant's tests build and run C++: no TensorFlow import (conftest.py).
        run = runner.run_tests(mutant.tests, copies, TIMEOUT_S, conftest=mutant.tree != SOURCE)
    finally:
        runner.restore(package, copies, mutant)
    # Killed means: pytest reported test failures (exit 1) and one of them is
    # a test selected for this mutant. A timeout, a collection or fixture
    # error, or a failure elsewhere proves nothing either way.
    caught = [name for name in run.failed if runner.is_selected(name, mutant.tests)]
    if run.timed_out:
        return f"INCONCLUSIVE: its tests did not finish in {TIMEOUT_S} s", True, []
    skipped = runner.only_skipped(run) if mutant.tree == SOURCE else None
    if skipped:
        return f"skipped (its tests were skipped: {skipped})", False, []
    if run.returncode == 0:
        killed, how = False, f"its tests passed ({run.seconds:.0f} s)"
    elif run.returncode == 1 and caught:
        names = ", ".join(name.split("::")[-1] for name in caught)
        killed, how = True, f"failed: {names} ({run.seconds:.0f} s)"
    else:
        return (
            (
                f"INCONCLUSIVE: pytest exit {run.returncode} without a selected test failing "
                f"(errors, not failures):\n{run.output[-2000:]}"
            ),
            True,
            [],
        )
    if mutant.pending:
        if killed:
            return f"PENDING MARK STALE: now killed ({how}); drop `pending`", True, []
        return f"pending, survived as known ({how}): {mutant.pending}", False, []
    return (f"killed, {how}", False, caught) if killed else (f"SURVIVED: {how}", True, [])


def check_evidence(evidence: dict[str, list[str]], copies: runner.Copies, jobs: int = 1) -> list[str] | None:
    """Reruns every test that killed a mutant against the unmutated copies
    (one pytest, on `jobs` xdist workers: nothing else runs by then).
    Returns the mutants whose every killing test fails unmutated too (their
    kills prove nothing), or None when the rerun itself broke (a timeout, errors)."""
    tests = tuple(dict.fromkeys(test for caught in evidence.values() for test in caught))
    files = {test.split("::")[0] for test in tests}  # --dist loadfile: a worker per file at most
    run = runner.run_tests(tests, copies, RERUN_TIMEOUT_S, stop_at_first=False, workers=min(jobs, len(files)))
    if run.timed_out:
        print(
            f"mutation check: the {len(tests)} killing tests did not finish in {RERUN_TIMEOUT_S} s "
            "without any mutant (a loaded machine, or a test that hangs)",
            file=sys.stderr,
        )
        return None
    if run.returncode not in (0, 1) or (run.returncode == 1 and not run.failed):
        print(run.output[-4000:])
        print(
            f"mutation check: the killing tests broke without any mutant (pytest exit {run.returncode})",
            file=sys.stderr,
        )
        return None
    failing = set(run.failed)
    unproven = [name for name, caught in evidence.items() if failing.issuperset(caught)]
    if failing:
        print(run.output[-4000:])
    for name in unproven:
        print(f"UNPROVEN: {name}: its killing tests fail without the mutant too: {', '.join(evidence[name])}")
    print(f"\nunmutated: {len(tests) - len(failing)} of the {len(tests)} killing tests pass ({run.seconds:.0f} s)")
    return unproven


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print the mutants and exit")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these mutants")
    parser.add_argument("--package-dir", help="the grad_reverse package to mutate (default: the importable one)")
    parser.add_argument(
        "--jobs",
        type=int,
        default=runner.cores(),
        help=f"mutants tested at once, each on copies of its own (default: one per core, {runner.cores()} here)",
    )
    parser.add_argument(
        "--without-library",
        action="store_true",
        help="a package without the built library: the models' mutants on Keras' JAX or PyTorch backend",
    )
    args = parser.parse_args(argv)

    mutants = list(MUTANTS)
    if args.only:
        unknown = set(args.only) - {m.name for m in mutants}
        if unknown:
            parser.error(f"unknown mutants: {', '.join(sorted(unknown))}; see --list")
        mutants = [m for m in mutants if m.name in args.only]
    print(f"{len(mutants)} mutants:")
    print_list(mutants)
    if args.list:
        return 0

    start = time.monotonic()
    try:
        package = runner.find_package(args.package_dir, library=not args.without_library)
    except runner.CheckError as error:
        print(f"mutation check: {error}", file=sys.stderr)
        return 2
    build = runner.build_record(package)
    print(f"\npackage: {package} (TensorFlow {build.get('tensorflow_version')}, xla={build.get('xla')})")
    with tempfile.TemporaryDirectory(prefix="mutation-check-") as scratch:
        # One set of copies per job: a mutant edits its copy until its tests are done.
        idle: queue.Queue[runner.Copies] = queue.Queue()
        for job in range(max(1, args.jobs)):
            root = Path(scratch) / f"job-{job}"
            root.mkdir()
            idle.put(runner.Copies(runner.copy_package(package, root), runner.copy_sources(root)))

        def judge(mutant: Mutant) -> tuple[str, bool, list[str]]:
            copies = idle.get()
            try:
                return verdict(mutant, package, copies, build)
            finally:
                idle.put(copies)

        failures = []
        evidence: dict[str, list[str]] = {}  # a mutant's name -> the tests that failed under it
        numbers = {mutant.name: number for number, mutant in enumerate(mutants, 1)}
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            # Started group by group (the mutants that the same test files catch), the
            # largest groups first, so that small ones fill the last minutes of every job;
            # each line is printed as its mutant finishes, with its number in the list.
            running = {pool.submit(judge, mutant): mutant for mutant in runner.by_test_files(mutants)}
            for done in as_completed(running):
                mutant = running[done]
                line, failed, caught = done.result()
                print(f"{numbers[mutant.name]:2}. {mutant.name}: {line}", flush=True)
                if failed:
                    failures.append(mutant.name)
                if caught:
                    evidence[mutant.name] = caught
        failures.sort(key=numbers.get)
        if evidence:
            in_order = dict(sorted(evidence.items(), key=lambda item: numbers[item[0]]))
            unproven = check_evidence(in_order, idle.get(), args.jobs)
            if unproven is None:
                return 2
            failures.extend(unproven)
    seconds = time.monotonic() - start
    if failures:
        print(f"\nmutation check FAILED ({seconds:.0f} s): {', '.join(failures)}")
        return 1
    print(f"\nmutation check passed: {len(mutants)} mutants, none survived ({seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
