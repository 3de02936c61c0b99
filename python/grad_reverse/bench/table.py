"""Sizes as the table writes them (1K, 16M), both ways, and the printed table."""

from __future__ import annotations

import re
import statistics
import textwrap
from typing import Optional, Sequence

from grad_reverse.bench.limit import KernelBandwidth, beyond_cache, last_level_cache_bytes
from grad_reverse.bench.measure import Limit, Result

# Prose lines (the limit and kernel sections) wrap here; the table's rows
# are as wide as their columns.
WIDTH = 100
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_SIZE = re.compile(r"(\d+)([KMG]?)", re.IGNORECASE)
SIZES_HELP = "comma-separated element counts: 1024, 1K, 16M (K = 1024, M = 1024^2, G = 1024^3)"
LAMBDA_TITLES = {
    "variable": "lambda: a tf.Variable (what a schedule assigns; the default)",
    "float": "lambda: a Python float",
}


def size_label(n: int) -> str:
    """1024 -> "1K", 16777216 -> "16M"; a count with no such unit stays a number."""
    for unit in ("G", "M", "K"):
        scale = _UNITS[unit]
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def parse_size(text: str) -> int:
    """"16M" -> 16777216, "1K" -> 1024, "1000" -> 1000 (what `size_label` writes, and counts)."""
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise ValueError(f"{text.strip()!r} is not a size: use {SIZES_HELP}")
    size = int(match.group(1)) * _UNITS[match.group(2).upper()]
    if size < 1:
        raise ValueError(f"sizes must be at least 1 element, got {text.strip()!r}")
    return size


def parse_sizes(text: str) -> list[int]:
    """"1K,16M" -> [1024, 16777216]."""
    return [parse_size(part) for part in text.split(",")]


def _number(value: Optional[float], width: int, digits: int) -> str:
    return f"{value:{width}.{digits}f}" if value is not None else f"{'-':>{width}s}"


def _floor_ms(result: Result) -> Optional[float]:
    return result.median(result.floor) * 1e3 if result.floor else None


def format_table(results: Sequence[Result]) -> str:
    """One section per kind of lambda (the Variable first), a row per case:
    median ms per call, the ratios round by round, and the backward's GB/s
    against the limit measured in the same run."""
    header = (f"{'case':10s} {'mode':12s} {'size':>6s} {'dtype':8s} {'native ms':>10s} {'ref ms':>10s} "
              f"{'floor ms':>10s} {'floor':>13s} {'ref/native':>10s} {'native/floor':>12s} "
              f"{'bwd GB/s':>8s} {'limit':>6s} {'of limit':>8s}")
    lines = []
    kinds = [k for k in LAMBDA_TITLES if any(r.lambda_kind == k for r in results)]
    for kind in kinds:
        lines += ["", LAMBDA_TITLES[kind], header, "-" * len(header)]
        for r in (r for r in results if r.lambda_kind == kind):
            fraction = r.fraction_of_limit()
            lines.append(
                f"{r.case:10s} {r.mode:12s} {size_label(r.size):>6s} {r.dtype:8s} "
                f"{r.median('native') * 1e3:10.4f} {r.median('reference') * 1e3:10.4f} "
                f"{_number(_floor_ms(r), 10, 4)} {r.floor or '-':>13s} "
                f"{_number(r.ratio(), 10, 2)} {_number(r.over_floor(), 12, 3)} "
                f"{_number(r.native_gbps(), 8, 1)} {_number(r.limit_gbps, 6, 1)} "
                f"{f'{fraction:.0%}' if fraction is not None else '-':>8s}"
            )
    return "\n".join(lines).lstrip("\n")


def _cache_note(nbytes: int, buffers: int) -> str:
    if beyond_cache(nbytes, buffers):
        return ""
    return (f"  [under twice the {last_level_cache_bytes() / 2**20:.0f} MiB last-level cache: passes run from "
            f"the cache, no memory limit applies, rows show none]")


def format_limits(limits: dict[int, Limit], dtype_size: int) -> str:
    """The limit per size, over all its cases' rounds, and each way's share."""
    lines = [_wrapped("memory-bandwidth limit (read+write GB/s), timed in the same rounds as the cases above and "
                      "the kernel alone: the fastest pass any of these ways made in the run, what every row of that "
                      "size is read against (a row's figure is its median call); each way at its fastest pass "
                      "(median):")]
    for nbytes, limit in sorted(limits.items()):
        ways = ", ".join(f"{name} {gbps:.1f} ({limit.medians[name]:.1f})" for name, gbps in limit.methods.items())
        lines.append(_wrapped(f"  {size_label(nbytes // dtype_size):>6s}: {limit.gbps:6.1f} over {limit.rounds} "
                              f"rounds, by {limit.method}  ({ways}){_cache_note(nbytes, 2)}", indent=10))
    return "\n".join(lines)


def _wrapped(text: str, indent: int = 0) -> str:
    """`text` in lines of at most WIDTH characters, continuation lines indented by `indent`."""
    return textwrap.fill(text, WIDTH, subsequent_indent=" " * indent, break_long_words=False,
                         break_on_hyphens=False, drop_whitespace=True, replace_whitespace=False)


def format_kernel_rows(rows: Sequence[KernelBandwidth], dtype: str) -> str:
    """The kernel alone, in place, against the limit timed in its rounds."""
    lines = [_wrapped("backward kernel alone, in place (read+write GB/s, median over rounds of 9 passes minus 1; "
                      "the limit: its size's, above, with the copying and in-place ways also timed in these "
                      "rounds):")]
    for row in rows:
        if row.gbps is None:
            lines.append(f"  {size_label(row.size):>6s} {dtype}: not measurable (8 passes took less than the noise)")
            continue
        fraction = row.fraction_of_limit()
        of_limit = f"  {fraction:.0%} of the limit {row.limit_gbps:.1f}" if fraction is not None else ""
        lines.append(_wrapped(f"  {size_label(row.size):>6s} {dtype}: {row.gbps:6.1f}{of_limit}"
                              f"{_cache_note(row.nbytes, 1)}", indent=10))
    return "\n".join(lines)


def summary_line(results: Sequence[Result], case: str, mode: str, kind: str) -> Optional[str]:
    """Median over sizes of reference/native for one case, mode and lambda."""
    ratios = [r.ratio() for r in results if (r.case, r.mode, r.lambda_kind) == (case, mode, kind) and r.ratio()]
    if not ratios:
        return None
    if len(ratios) == 1:
        return f"{case} {mode}: reference/native {ratios[0]:.2f}"
    return f"{case} {mode}: reference/native {min(ratios):.2f} to {max(ratios):.2f} (median {statistics.median(ratios):.2f})"
