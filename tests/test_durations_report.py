"""The end-of-run report (helpers/durations.py, a plugin conftest.py loads):
every not-slow test over the one-test budget, its set-up counted."""

from types import SimpleNamespace

from helpers import durations


class Reporter:
    """The two TerminalReporter methods the report writes with, recorded."""

    def __init__(self):
        self.lines = []

    def write_sep(self, sep, title):
        self.lines.append(f"[{title}]")

    def write_line(self, line):
        self.lines.append(line)


def report(node, when, seconds, slow=False):
    return SimpleNamespace(nodeid=node, when=when, duration=seconds, keywords={"slow": 1} if slow else {})


def timed(*reports):
    record = durations.Durations()
    for one in reports:
        record.add(one)
    return record


def test_setup_call_and_teardown_add_up_and_slow_tests_are_left_out():
    record = timed(
        report("t.py::shared", "setup", 4.0),  # the first user of a module fixture pays for it
        report("t.py::shared", "call", 1.5),
        report("t.py::shared", "teardown", 0.1),
        report("t.py::quick", "call", 0.2),
        report("t.py::long", "call", 9.0),
        report("t.py::trains", "setup", 0.1, slow=True),
        report("t.py::trains", "call", 60.0, slow=True),
        report("t.py::at_the_budget", "call", durations.BUDGET_S),
    )
    assert [(round(total, 1), node) for total, node, _ in record.over_budget()] == [
        (9.0, "t.py::long"),
        (5.6, "t.py::shared"),
    ]
    lines = [durations.describe(*row) for row in record.over_budget()]
    assert lines == ["   9.0 s  t.py::long", "   5.6 s  t.py::shared (setup 4.0 s)"]


def test_the_summary_lists_them_under_a_title_and_says_nothing_without_any(monkeypatch):
    config = SimpleNamespace(option=SimpleNamespace(verbose=0))
    monkeypatch.setattr(durations, "DURATIONS", timed(report("t.py::quick", "call", 0.3)))
    reporter = Reporter()
    durations.pytest_terminal_summary(reporter, config)
    assert reporter.lines == []

    monkeypatch.setattr(durations, "DURATIONS", timed(report("t.py::long", "call", 7.0)))
    durations.pytest_terminal_summary(reporter, config)
    assert reporter.lines == [
        "[not-slow tests over 5 s (1): mark them slow or make them cheaper]",
        "   7.0 s  t.py::long",
    ]
    quiet = Reporter()
    durations.pytest_terminal_summary(quiet, SimpleNamespace(option=SimpleNamespace(verbose=-2)))
    assert quiet.lines == []
