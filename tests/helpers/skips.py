"""The end-of-run summary of skipped tests, counted by reason; conftest.py
registers it as its pytest_terminal_summary hook."""

import collections


def skip_reason(report) -> str:
    """A skipped test's reason, as pytest.skip or skipif gave it."""
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    return reason.removeprefix("Skipped: ")


def pytest_terminal_summary(terminalreporter, config):
    """At the end of a run, the skips counted by reason ("32  no GPU"), most
    first: "58 skipped" alone does not say which promises went unchecked
    here. Above pytest's own last line, which scripts read; -qq leaves it out."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped or config.option.verbose < -1:
        return
    terminalreporter.write_sep("-", f"skip reasons ({len(skipped)} test{'' if len(skipped) == 1 else 's'})")
    for reason, count in collections.Counter(skip_reason(report) for report in skipped).most_common():
        terminalreporter.write_line(f"{count:5d}  {reason}")
