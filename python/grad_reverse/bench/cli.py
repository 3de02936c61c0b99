"""`python -m grad_reverse bench`: runs the cases, prints the table, writes
bench.json and bench.png."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import tensorflow as tf

import grad_reverse
from grad_reverse.bench import cases, regime, table
from grad_reverse.bench.allocations import backward_allocations
from grad_reverse.bench.limit import KernelBandwidth, LimitWays, kernel_bandwidth
from grad_reverse.bench.measure import Limit, Result, limit_from_times

FULL_SIZES = (1 << 10, 1 << 16, 1 << 20, 1 << 22, 1 << 24, 1 << 26)
QUICK_SIZES = (1 << 10, 1 << 20, 1 << 24)
DTYPES = tuple(d.name for d in grad_reverse.SUPPORTED_DTYPES)
ALLOCATION_SIZE = 1 << 24


class Progress:
    """One updating line on a terminal; elsewhere (a log, a pipe) one short
    line per case. On stderr, so that stdout holds only the results."""

    def __init__(self, total: int, enabled: bool = True) -> None:
        self.total, self.enabled = total, enabled
        self.terminal = sys.stderr.isatty()

    def start(self, index: int, label: str) -> None:
        """Case `index` (from 0) begins."""
        if not self.enabled:
            return
        text = f"bench [{index + 1}/{self.total}] {label}"
        sys.stderr.write(f"\r{text:<72s}" if self.terminal else text + "\n")
        sys.stderr.flush()

    def finish(self) -> None:
        if self.enabled and self.terminal:
            sys.stderr.write("\n")
            sys.stderr.flush()


class LimitWaysBySize:
    """The limit's ways for the byte count the current case needs, built on
    first use and shared by the cases of that size that follow; asked for
    another size, it frees the previous one's (at 64M float32 they hold
    three 256 MiB buffers). `close()` frees the last."""

    def __init__(self, dtype: tf.DType) -> None:
        self.dtype, self.ways = dtype, {}

    def __call__(self, size: int) -> cases.Beside:
        """The ways to time beside a case of `size` elements; None below the
        bandwidth-bound sizes."""
        if size < cases.BANDWIDTH_BOUND_SIZE:
            return None
        nbytes = size * self.dtype.size
        if nbytes not in self.ways:
            self.close()
            self.ways[nbytes] = LimitWays(nbytes, self.dtype)
        return self.ways[nbytes].calls

    def close(self) -> None:
        for ways in self.ways.values():
            ways.close()
        self.ways.clear()


# Where the command writes bench.json and bench.png without --out (the demo's is grad_reverse_demo).


def plan(
    sizes: Sequence[int],
    dtype: tf.DType,
    rounds: int,
    lambdas: Sequence[str],
    quick: bool,
    dann: bool,
    beside: Callable[[int], cases.Beside] = lambda size: None,
) -> list[tuple[str, Callable[[], Result]]]:
    """(label, run) for every case, the Variable lambda's first. `beside(size)`:
    the limit's ways to time in that size's forward+backward cases."""
    steps: list[tuple[str, Callable[[], Result]]] = []
    for kind in lambdas:
        for size in sizes:
            label = f"{table.size_label(size)} {dtype.name}, {kind} lambda"
            steps.append((f"eager {label}", lambda s=size, k=kind: cases.case_eager(s, dtype, rounds, k, beside(s))))
            steps.append(
                (
                    f"tf.function {label}",
                    lambda s=size, k=kind: cases.case_function(s, dtype, rounds, False, k, beside(s)),
                )
            )
            steps.append(
                (f"xla {label}", lambda s=size, k=kind: cases.case_function(s, dtype, rounds, True, k, beside(s)))
            )
            if regime.page_fault_bound(size, dtype.name):
                steps.append((f"in place {label}", lambda s=size, k=kind: regime.case_in_place(s, dtype, rounds, k)))
    chain_size = min(max(sizes), 1 << 24)
    for kind in lambdas:
        steps.append(
            (
                f"chain {table.size_label(chain_size)}, {kind} lambda",
                lambda k=kind: cases.case_chain(chain_size, dtype, rounds, k),
            )
        )
    if dann:
        batch, width = (256, 1024) if quick else (512, 2048)
        for kind in lambdas:
            steps.append((f"DANN step, {kind} lambda", lambda k=kind: cases.case_dann_step(batch, width, rounds, k)))
    return steps


def pooled_limits(results: Sequence[Result], kernel_rows: Sequence[KernelBandwidth] = ()) -> dict[int, Limit]:
    """Per byte count, the limit over the rounds of every case of that size,
    the kernel alone's included: the fastest pass any way made in the run."""
    pooled: dict[int, dict[str, list[float]]] = {}
    samples_by_size = [(r.bytes_moved // 2, r.limit_times) for r in results if r.limit_times and r.bytes_moved]
    samples_by_size += [(row.nbytes, row.limit_times) for row in kernel_rows if row.limit_times]
    for nbytes, limit_times in samples_by_size:
        times = pooled.setdefault(nbytes, {})
        for name, samples in limit_times.items():
            times.setdefault(name, []).extend(samples)
    limits = {nbytes: limit_from_times(nbytes, times) for nbytes, times in pooled.items()}
    # A limit is what nothing measured in the run passes: where a row's own figure beat every
    # way's fastest pass (the kernel's eight passes in a row can outrun any single pass), that
    # figure is the limit, named for the row.
    for nbytes, gbps, name, median in measured_figures(results, kernel_rows):
        if nbytes in limits and gbps > limits[nbytes].gbps:
            limit = limits[nbytes]
            methods, medians = {**limit.methods, name: gbps}, {**limit.medians, name: median}
            limits[nbytes] = dataclasses.replace(limit, gbps=gbps, method=name, methods=methods, medians=medians)
    return limits


def measured_figures(results: Sequence[Result], kernel_rows: Sequence[KernelBandwidth]) -> list:
    """`(bytes each way, read+write GB/s, what, its median)` of every figure the run measured where
    a memory limit applies: each case's fastest native call (its median is below), each kernel-alone
    row (a median over rounds)."""
    figures = []
    for r in results:
        if r.limit_gbps and r.bytes_moved and r.native_gbps():
            fastest = r.bytes_moved / min(r.times["native"]) / 1e9
            figures.append((r.bytes_moved // 2, fastest, f"{r.case} {r.mode} native", r.native_gbps()))
    kernels = [row for row in kernel_rows if row.limit_gbps and row.gbps]
    return figures + [(row.nbytes, row.gbps, "the kernel alone", row.gbps) for row in kernels]


def read_against_pooled_limits(
    results: Sequence[Result], kernel_rows: Sequence[KernelBandwidth], limits: dict[int, Limit]
) -> None:
    """Every row where a memory limit applies is read against its size's
    pooled limit, the fastest pass of the whole run: more samples than its
    own rounds, so a short burst of bandwidth that one of its calls met is
    more likely to have been met by a way too."""
    for result in results:
        if result.limit_gbps and result.bytes_moved // 2 in limits:
            result.limit_gbps = limits[result.bytes_moved // 2].gbps
    for row in kernel_rows:
        if row.limit_gbps and row.nbytes in limits:
            row.limit_gbps = limits[row.nbytes].gbps
    figures = measured_figures(results, kernel_rows)
    passing = [(what, gbps) for nbytes, gbps, what, _ in figures if nbytes in limits and gbps > limits[nbytes].gbps]
    if passing:  # cannot happen with pooled_limits' limits: a check that the table never says over 100 %
        raise RuntimeError(f"bench: rows pass their size's memory-bandwidth limit: {passing}")


def _named(floor: str) -> str:
    return f"({floor})" if "+" in floor else floor


def summary(results: Sequence[Result]) -> list[str]:
    """The headline ratios, per kind of lambda."""
    lines = []
    for kind in table.LAMBDA_TITLES:
        rows = [r for r in results if r.lambda_kind == kind]
        if not rows:
            continue
        lines.append(table.LAMBDA_TITLES[kind] + ":")
        eager = [r for r in rows if r.case == "fwd+bwd" and r.mode == "eager"]
        for r in eager:
            if r.size == min(x.size for x in eager):
                lines.append(
                    f"  eager {table.size_label(r.size)}: reference/native {r.ratio():.2f}, "
                    f"native/{_named(r.floor)} {r.over_floor():.3f}"
                )
        for mode in ("tf.function", "xla"):
            line = table.summary_line([r for r in rows if r.bytes_moved], "fwd+bwd", mode, kind)
            if line:
                lines.append(f"  {line} (sizes from {table.size_label(cases.BANDWIDTH_BOUND_SIZE)})")
        line = table.summary_line(rows, "in place", "tf.function", kind)
        if line:
            lines.append(f"  {line} (dy made in the graph; sizes whose fresh dx is page-fault bound)")
        for r in rows:
            if r.case == "chain":
                lines.append(f"  chain {table.size_label(r.size)}: reference/native {r.ratio():.2f}")
            if r.case == "dann step":
                lines.append(
                    f"  DANN step: native/no GRL {r.over_floor():.3f}, reference/no GRL "
                    f"{r.ratio('reference', 'no GRL'):.3f}"
                )
    return lines


def run(
    quick: bool = False,
    dtype: str = "float32",
    out: str | None = None,
    sizes: Sequence[int] | None = None,
    rounds: int | None = None,
    progress: bool = True,
    memory: bool = True,
    dann: bool = True,
    lambdas: Sequence[str] = cases.LAMBDA_KINDS,
    verbose: bool = False,
) -> list[Result]:
    """Runs every case and prints the summary, then the table; returns the results. With `out`,
    also writes bench.json and bench.png there (the command's default:
    DEFAULT_OUT) and prints their paths."""
    tf_dtype = tf.as_dtype(dtype)
    sizes = tuple(sizes or (QUICK_SIZES if quick else FULL_SIZES))
    rounds = rounds or (11 if quick else 41)
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    ways = LimitWaysBySize(tf_dtype)
    try:
        steps = plan(sizes, tf_dtype, rounds, lambdas, quick, dann, ways)
        bar = Progress(len(steps), progress)
        results: list[Result] = []
        for i, (label, make) in enumerate(steps):
            bar.start(i, label)
            results.append(make())
        bar.finish()
    finally:
        ways.close()
    kernel_rows = [kernel_bandwidth(size, tf_dtype, rounds) for size in sizes if size >= cases.BANDWIDTH_BOUND_SIZE]
    limits = pooled_limits(results, kernel_rows)
    read_against_pooled_limits(results, kernel_rows, limits)
    machine = regime.describe()  # after the cases: the streaming-store measurement has run
    print(regime.format_machine(machine) + "\n")
    # The headline first: the full table, the limits and the allocations follow.
    print("summary (ratios taken round by round, median; the full table below):")
    print("\n".join(summary(results)) + "\n")
    print(table.format_table(results))
    if limits:
        print("\n" + table.format_limits(limits, tf_dtype.size))
    if kernel_rows:
        print("\n" + table.format_kernel_rows(kernel_rows, dtype))
    allocations = {}
    if memory:
        allocations = {
            impl: backward_allocations(impl, ALLOCATION_SIZE, tf_dtype, verbose) for impl in ("native", "reference")
        }
        print(
            f"\nbytes allocated by the backward (tf.function, dy a graph temporary, "
            f"{table.size_label(ALLOCATION_SIZE)} {dtype}, {ALLOCATION_SIZE * tf_dtype.size / 2**20:.0f} MiB "
            f"per tensor): " + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in allocations.items())
        )
    if out:
        write_outputs(
            Path(out),
            results,
            limits,
            kernel_rows,
            allocations,
            dtype,
            started,
            plot_title(dtype, quick, sizes),
            machine,
        )
    return results


def plot_title(dtype: str, quick: bool, sizes: Sequence[int]) -> str:
    title = f"grad-reverse forward+backward, {dtype}: native op, tf.custom_gradient, floor"
    if quick:
        title += f"  (--quick: {len(sizes)} sizes only)"
    return title


def write_outputs(
    directory: Path,
    results: Sequence[Result],
    limits: dict[int, Limit],
    kernel_rows: list,
    allocations: dict,
    dtype: str,
    started: str,
    title: str,
    machine: dict[str, str] | None = None,
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    payload = {
        "machine": machine or regime.describe(),
        "tensorflow": tf.__version__,
        "grad_reverse": grad_reverse.__version__,
        "dtype": dtype,
        "started": started,
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "cpu_count": os.cpu_count(),
        "gpus": [d.name for d in tf.config.list_logical_devices("GPU")],
        "results": [r.summary() for r in results],
        "bandwidth_limits": [vars(limit) for limit in limits.values()],
        "backward_allocated_bytes": allocations,
        "kernel_in_place_bandwidth": [
            {
                "size": row.size,
                "native_gbps": row.gbps,
                "limit_gbps": row.limit_gbps,
                "fraction_of_limit": row.fraction_of_limit(),
            }
            for row in kernel_rows
        ],
    }
    (directory / "bench.json").write_text(json.dumps(payload, indent=2))
    try:
        from grad_reverse.bench.plot import plot

        plot(results, directory / "bench.png", title)
        print(f"wrote {directory / 'bench.json'} and {directory / 'bench.png'}")
    except ImportError:
        print(f"wrote {directory / 'bench.json'} (install matplotlib, or grad-reverse[bench], for the plot)")
