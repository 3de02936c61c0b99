"""The end-of-run summary (helpers/skips.py, conftest's hook): the skips
counted by reason, most first."""

from types import SimpleNamespace

from helpers import skips


class Reporter:
    """The two TerminalReporter methods the summary writes with, recorded."""

    def __init__(self, skipped):
        self.stats = {"skipped": skipped} if skipped is not None else {}
        self.lines = []

    def write_sep(self, sep, title):
        self.lines.append(f"[{title}]")

    def write_line(self, line):
        self.lines.append(line)


def skip(reason, phase_tuple=True):
    text = f"Skipped: {reason}"
    return SimpleNamespace(longrepr=("tests/test_x.py", 3, text) if phase_tuple else text)


def summary(skipped, verbose=0):
    reporter = Reporter(skipped)
    skips.pytest_terminal_summary(reporter, SimpleNamespace(option=SimpleNamespace(verbose=verbose)))
    return reporter.lines


def test_skips_are_counted_by_reason_most_first_without_pytests_prefix():
    skipped = [skip("CuPy is not installed")] * 2 + [skip("no GPU")] * 3 + [skip("no compiler", phase_tuple=False)]
    assert summary(skipped) == [
        "[skip reasons (6 tests)]",
        "    3  no GPU",
        "    2  CuPy is not installed",
        "    1  no compiler",
    ]


def test_nothing_is_written_without_skips_or_under_qq():
    assert summary(None) == [] and summary([]) == []
    assert summary([skip("no GPU")], verbose=-2) == []
    assert summary([skip("no GPU")], verbose=-1) == ["[skip reasons (1 test)]", "    1  no GPU"]  # -q still shows it
