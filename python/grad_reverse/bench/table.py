"""Sizes as the table writes them (1K, 16M), both ways, and the printed table."""

from __future__ import annotations

import statistics
import textwrap
from collections.abc import Sequence

from grad_reverse.bench import limit as bandwidth  # looked up at each call: tests set the cache size
from grad_reverse.bench.cases import BANDWIDTH_BOUND_SIZE
from grad_reverse.bench.limit import KernelBandwidth
from grad_reverse.bench.measure import Limit, Result
from grad_reverse.bench.settings import SIZES_HELP, parse_size, parse_sizes, size_label  # noqa: F401 (their home before)

# The case whose dy is a graph temporary (`regime.case_in_place`).
IN_PLACE = "in place"
# The table's rows and its prose lines (legend, limit and kernel sections)
# fit in this many columns.
WIDTH = 100
LAMBDA_TITLES = {
    "variable": "lambda: a tf.Variable (what a schedule assigns; the default)",
    "float": "lambda: a Python float",
}


def _number(value: float | None, width: int, digits: int) -> str:
    return f"{value:{width}.{digits}f}" if value is not None else f"{'-':>{width}s}"


def _floor_ms(result: Result) -> float | None:
    return result.median(result.floor) * 1e3 if result.floor else None


def _percent(fraction: float | None, width: int) -> str:
    return f"{f'{fraction:.0%}' if fraction is not None else '-':>{width}s}"


# The table's columns: two header lines (read downwards: "native" over "ms"),
# a width, and how a row fills the cell. Widths plus one space between
# columns come to WIDTH, so a row fits a 100-column terminal.
COLUMNS = (
    ("", "case", 9, lambda r: f"{r.case:9s}"),
    ("", "mode", 11, lambda r: f"{r.mode:11s}"),
    ("", "size", 5, lambda r: f"{size_label(r.size):>5s}"),
    ("", "dtype", 8, lambda r: f"{r.dtype:8s}"),
    ("native", "ms", 8, lambda r: f"{r.median('native') * 1e3:8.4f}"),
    ("reference", "ms", 9, lambda r: f"{r.median('reference') * 1e3:9.4f}"),
    ("floor", "ms", 8, lambda r: _number(_floor_ms(r), 8, 4)),
    ("ref/", "native", 6, lambda r: _number(r.ratio(), 6, 2)),
    ("native/", "floor", 7, lambda r: _number(r.over_floor(), 7, 3)),
    ("backward", "GB/s", 8, lambda r: _number(r.native_gbps(), 8, 1)),
    ("limit", "GB/s", 5, lambda r: _number(r.limit_gbps, 5, 1)),
    ("% of", "limit", 5, lambda r: _percent(r.fraction_of_limit(), 5)),
)
LEFT = ("case", "mode", "dtype")  # text columns; the numbers (and sizes) align right
LEGEND = (
    "ms: median per call, forward+backward (DANN step: a training step); reference: the pure-Python "
    "tf.custom_gradient version; floor: no reversal (tf.identity; eager with a Variable: plus one read of it; "
    "DANN step: an Identity layer); ratios: round by round, median; backward GB/s: the bytes it reads and "
    "writes over native ms; limit: memory bandwidth (below)."
)


def _header() -> list[str]:
    lines = []
    for line in (0, 1):
        cells = [f"{column[line]:{'<' if column[1] in LEFT else '>'}{column[2]}s}" for column in COLUMNS]
        lines.append(" ".join(cells).rstrip())
    return lines


def _row(result: Result) -> str:
    return " ".join(column[3](result) for column in COLUMNS)


def _smallest_beyond_cache(dtype_size: int) -> str | None:
    """The smallest power-of-two size whose two buffers go to memory, as the table writes it."""
    cache = bandwidth.last_level_cache_bytes()
    if cache is None:
        return None
    size = 1
    while not bandwidth.beyond_cache(size * dtype_size, 2):
        size *= 2
    return size_label(size)


def empty_limit_note(results: Sequence[Result]) -> str | None:
    """Why the GB/s and limit columns are empty where they are (None where none is)."""
    unbound = list(
        dict.fromkeys(
            r.case if r.case != "fwd+bwd" else f"under {size_label(BANDWIDTH_BOUND_SIZE)}"
            for r in results
            if not r.bytes_moved and r.case != IN_PLACE
        )
    )
    no_limit = [r for r in results if r.bytes_moved and r.limit_gbps is None]
    in_cache = [r for r in no_limit if not bandwidth.beyond_cache(r.bytes_moved // 2)]
    unmeasured = [r for r in no_limit if bandwidth.beyond_cache(r.bytes_moved // 2)]
    notes = []
    if unbound:
        notes.append(f"GB/s and limit empty: {', '.join(unbound)} (not bound by memory bandwidth)")
    if in_cache:
        sizes = ", ".join(dict.fromkeys(size_label(r.size) for r in in_cache))
        smallest = _smallest_beyond_cache(in_cache[0].bytes_moved // 2 // in_cache[0].size)
        cache_mib = bandwidth.last_level_cache_bytes() / 2**20
        notes.append(
            f"limit empty at {sizes}: dy and dx fit in twice this CPU's {cache_mib:.0f} MiB last-level "
            f"cache, so passes run from the cache and no memory limit applies (from --sizes {smallest} on, "
            f"one does)"
        )
    if unmeasured:
        notes.append(f"no limit measured at {', '.join(dict.fromkeys(size_label(r.size) for r in unmeasured))}")
    if any(r.case == IN_PLACE for r in results):
        notes.append(
            "in place: dy is made in the graph (-dy, in every column), so the backward may write into it "
            "and no dx is faulted in; its time includes that negation, so no GB/s"
        )
    return "; ".join(notes) + "." if notes else None


def format_table(results: Sequence[Result]) -> str:
    """One section per kind of lambda (the Variable first), a row per case:
    median ms per call, the ratios round by round, and the backward's GB/s
    against the limit measured in the same run. Above them, once, what the
    columns mean and why the limit columns are empty where they are."""
    lines = [_wrapped(LEGEND)]
    note = empty_limit_note(results)
    if note:
        lines.append(_wrapped(note))
    header = _header()
    kinds = [k for k in LAMBDA_TITLES if any(r.lambda_kind == k for r in results)]
    for kind in kinds:
        lines += ["", LAMBDA_TITLES[kind], *header, "-" * WIDTH]
        lines += [_row(r) for r in results if r.lambda_kind == kind]
    return "\n".join(lines)


def _cache_note(nbytes: int, buffers: int) -> str:
    if bandwidth.beyond_cache(nbytes, buffers):
        return ""
    return (
        f"  [under twice the {bandwidth.last_level_cache_bytes() / 2**20:.0f} MiB last-level cache: passes run from "
        f"the cache, no memory limit applies, rows show none]"
    )


def format_limits(limits: dict[int, Limit], dtype_size: int) -> str:
    """The limit per size, over all its cases' rounds, and each way's share."""
    lines = [
        _wrapped(
            "memory-bandwidth limit (read+write GB/s), timed in the same rounds as the cases above and "
            "the kernel alone: the fastest pass any of these ways made in the run, or a row's own figure "
            "where one was faster (so no row passes it), what every row of that size is read against (a "
            "row's figure is its median call); each way at its fastest pass (median):"
        )
    ]
    for nbytes, limit in sorted(limits.items()):
        ways = ", ".join(f"{name} {gbps:.1f} ({limit.medians[name]:.1f})" for name, gbps in limit.methods.items())
        lines.append(
            _wrapped(
                f"  {size_label(nbytes // dtype_size):>6s}: {limit.gbps:6.1f} over {limit.rounds} "
                f"rounds, by {limit.method}  ({ways}){_cache_note(nbytes, 2)}",
                indent=10,
            )
        )
    return "\n".join(lines)


def _wrapped(text: str, indent: int = 0) -> str:
    """`text` in lines of at most WIDTH characters, continuation lines indented by `indent`."""
    return textwrap.fill(
        text,
        WIDTH,
        subsequent_indent=" " * indent,
        break_long_words=False,
        break_on_hyphens=False,
        drop_whitespace=True,
        replace_whitespace=False,
    )


def format_kernel_rows(rows: Sequence[KernelBandwidth], dtype: str) -> str:
    """The kernel alone, in place, against the limit timed in its rounds."""
    lines = [
        _wrapped(
            "backward kernel alone, in place (read+write GB/s, median over rounds of 9 passes minus 1; "
            "the limit: its size's, above, with the copying and in-place ways also timed in these "
            "rounds):"
        )
    ]
    for row in rows:
        if row.gbps is None:
            lines.append(f"  {size_label(row.size):>6s} {dtype}: not measurable (8 passes took less than the noise)")
            continue
        fraction = row.fraction_of_limit()
        of_limit = f"  {fraction:.0%} of the limit {row.limit_gbps:.1f}" if fraction is not None else ""
        lines.append(
            _wrapped(
                f"  {size_label(row.size):>6s} {dtype}: {row.gbps:6.1f}{of_limit}{_cache_note(row.nbytes, 1)}",
                indent=10,
            )
        )
    return "\n".join(lines)


def summary_line(results: Sequence[Result], case: str, mode: str, kind: str) -> str | None:
    """Median over sizes of reference/native for one case, mode and lambda."""
    ratios = [r.ratio() for r in results if (r.case, r.mode, r.lambda_kind) == (case, mode, kind) and r.ratio()]
    if not ratios:
        return None
    if len(ratios) == 1:
        return f"{case} {mode}: reference/native {ratios[0]:.2f}"
    return f"{case} {mode}: reference/native {min(ratios):.2f} to {max(ratios):.2f} (median {statistics.median(ratios):.2f})"
