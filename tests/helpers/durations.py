"""The end-of-run report of the not-slow tests over the budget of one test
(docs/testing.md, "Time budgets"); conftest.py loads it as a plugin
(`pytest_plugins`). A report, not an assertion: a test's time depends on the
machine and its load, so nothing fails by it; a test it lists is marked
`slow` or made cheaper (a shared fixture, fewer steps)."""

from __future__ import annotations

import collections

# Seconds a test outside `slow` may take, its set-up and tear-down included
# (the first user of a module- or session-scoped fixture pays for it).
BUDGET_S = 5.0
PHASES = ("setup", "call", "teardown")


class Durations:
    """Each test's seconds by phase, from the reports pytest logs (under
    pytest-xdist the workers' reports reach the controller the same way)."""

    def __init__(self) -> None:
        self.seconds: dict[str, dict[str, float]] = collections.defaultdict(dict)
        self.slow: set[str] = set()

    def add(self, report) -> None:
        self.seconds[report.nodeid][report.when] = report.duration
        if "slow" in report.keywords:
            self.slow.add(report.nodeid)

    def over_budget(self, budget: float = BUDGET_S) -> list[tuple[float, str, dict[str, float]]]:
        """(total seconds, node id, seconds by phase) of every not-slow test
        over `budget`, longest first."""
        totals = ((sum(phases.values()), node, phases) for node, phases in self.seconds.items())
        return sorted(
            ((total, node, phases) for total, node, phases in totals if total > budget and node not in self.slow),
            key=lambda row: (-row[0], row[1]),
        )


def describe(total: float, node: str, phases: dict[str, float]) -> str:
    """One line of the report: "  12.3 s  tests/x.py::test_y (setup 11.0 s)"."""
    setup = phases.get("setup", 0.0)
    share = f" (setup {setup:.1f} s)" if setup >= 1.0 else ""
    return f"{total:6.1f} s  {node}{share}"


DURATIONS = Durations()


def pytest_runtest_logreport(report) -> None:
    DURATIONS.add(report)


def pytest_terminal_summary(terminalreporter, config) -> None:
    """The not-slow tests over BUDGET_S, longest first, above pytest's last
    line; nothing when none is over, and nothing under -qq."""
    rows = DURATIONS.over_budget()
    if not rows or config.option.verbose < -1:
        return
    terminalreporter.write_sep(
        "-", f"not-slow tests over {BUDGET_S:g} s ({len(rows)}): mark them slow or make them cheaper"
    )
    for row in rows:
        terminalreporter.write_line(describe(*row))
