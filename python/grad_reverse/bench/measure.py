"""Timing: interleaved rounds of several implementations, and the result of
one case with the statistics the table reports.

A shared machine drifts: another process takes a core for a second, the
clock steps down. Timing every implementation once per round, round after
round, puts each one's samples side by side in time, so a ratio taken round
by round (then the median of those) cancels the drift that a ratio of two
separately measured medians would carry.

The memory-bandwidth limit is timed the same way: its ways of moving the
bytes (see `limit`) run in the very rounds of the case they bound. It is read
as a limit is: the fastest pass any way made in those rounds. Load only ever
slows a pass, so the quietest moment of the run sets the limit and the
case's median meets it only by moving the bytes as fast as the best way did
at its best.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import tensorflow as tf


def sync() -> None:
    """Waits for queued device work (GPU); a no-op on a CPU-only machine."""
    if tf.config.list_logical_devices("GPU"):
        tf.test.experimental.sync_devices()


def interleaved(
    calls: dict[str, Callable[[], object]],
    rounds: int,
    per_round: int = 1,
    settle: int = 0,
    after_round: Callable[[], object] | None = None,
    rotate: int = 0,
) -> dict[str, list[float]]:
    """Times each callable `rounds` times, one round of all of them at a time,
    each sample the mean of `per_round` back-to-back calls. Warms up first.

    `settle`: that many untimed calls right before each sample, so that
    every callable is timed in its own steady state (its buffers in the
    cache, as a training step's GRL finds its input and dy), not in the
    state the callable before it left.
    `after_round`: run, untimed, at the end of every round (see
    `cases.recover`). `rotate`: the first that many callables start one
    place later each round (round r: the r-th first, modulo that many), so
    that each takes each place equally often and what one leaves behind for
    the next weighs on all of them alike."""
    for fn in calls.values():
        fn()
    sync()
    times: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for round_ in range(rounds):
        shift = round_ % rotate if rotate else 0
        order = names[shift:rotate] + names[:shift] + names[rotate:] if rotate else names
        for name in order:
            fn = calls[name]
            for _ in range(settle):
                fn()
            sync()
            start = time.perf_counter()
            for _ in range(per_round):
                fn()
            sync()
            times[name].append((time.perf_counter() - start) / per_round)
        if after_round is not None:
            after_round()
            sync()
    return times


@dataclass
class Limit:
    """Read+write bandwidth for moving `nbytes` (each way) on this machine,
    from ways timed in the same rounds as what it bounds."""

    nbytes: int
    gbps: float  # 2 * nbytes over the fastest pass of any way in any round
    method: str  # the way that made that pass
    methods: dict[str, float] = field(default_factory=dict)  # every way's GB/s at its own fastest pass
    rounds: int = 0
    # Every way's GB/s at its median pass: how far the bursts stand above the usual.
    medians: dict[str, float] = field(default_factory=dict)


def limit_from_times(nbytes: int, times: dict[str, list[float]]) -> Limit:
    """The Limit that the ways' samples `times` (interleaved rounds) show: the
    fastest pass of all (see `limit` for why not a median)."""
    fastest = {name: min(samples) for name, samples in times.items()}
    method = min(fastest, key=fastest.get)
    methods = {name: 2 * nbytes / seconds / 1e9 for name, seconds in fastest.items()}
    # Rounds the limit spans: some rounds time fewer ways (the kernel alone's
    # have no TensorFlow multiply), so the way timed most often counts them.
    rounds = max((len(samples) for samples in times.values()), default=0)
    medians = {name: 2 * nbytes / statistics.median(samples) / 1e9 for name, samples in times.items()}
    return Limit(nbytes, methods[method], method, methods, rounds, medians)


def paired_ratio(numerator: list[float], denominator: list[float]) -> float:
    """Median over rounds of numerator[i] / denominator[i] (samples of one round
    were taken next to each other)."""
    return statistics.median(n / d for n, d in zip(numerator, denominator))


@dataclass
class Result:
    """One case: its samples (seconds per call) per implementation."""

    case: str  # "fwd+bwd", "chain", "dann step"
    mode: str  # "eager", "tf.function", "xla"
    size: int  # elements (the batch for the DANN step)
    dtype: str
    lambda_kind: str = "variable"  # "variable" (a tf.Variable) or "float" (a Python number)
    times: dict[str, list[float]] = field(default_factory=dict)
    bytes_moved: int = 0  # by the backward (read dy + write dx); 0 where not bandwidth-bound
    limit_gbps: float | None = None  # the machine's read+write bandwidth on those bytes
    # The limit's ways, timed in this case's rounds (their names, their samples).
    limit_times: dict[str, list[float]] = field(default_factory=dict)

    def take_limit(self, prefix: str, applies: bool = True) -> None:
        """Moves the samples named `prefix...` from `times` to `limit_times`
        and, where a memory limit `applies` (see limit.beyond_cache), sets
        `limit_gbps` from them: the fastest pass in this case's rounds (the
        command then reads each row against its size's limit over the whole
        run, `cli.read_against_pooled_limits`)."""
        names = [name for name in self.times if name.startswith(prefix)]
        self.limit_times = {name[len(prefix) :]: self.times.pop(name) for name in names}
        if self.limit_times and self.bytes_moved and applies:
            self.limit_gbps = limit_from_times(self.bytes_moved // 2, self.limit_times).gbps

    @property
    def floor(self) -> str | None:
        """The implementation that does no reversal: what a layer must at least cost."""
        for name in ("identity+read", "identity", "no GRL"):
            if name in self.times:
                return name
        return None

    def median(self, impl: str) -> float:
        return statistics.median(self.times[impl])

    def ratio(self, numerator: str = "reference", denominator: str = "native") -> float | None:
        """Round-by-round ratio of two implementations' times (median of the rounds)."""
        if numerator in self.times and denominator in self.times:
            return paired_ratio(self.times[numerator], self.times[denominator])
        return None

    def over_floor(self) -> float | None:
        """native / floor, round by round."""
        return self.ratio("native", self.floor) if self.floor else None

    def native_gbps(self) -> float | None:
        """The backward's bytes over the median native forward+backward time."""
        if not self.bytes_moved or "native" not in self.times:
            return None
        return self.bytes_moved / self.median("native") / 1e9

    def fraction_of_limit(self) -> float | None:
        """The backward's GB/s (the median call) over the limit (the fastest
        pass of its ways: in this case's rounds, or in every round of its size
        where the command pooled them)."""
        gbps = self.native_gbps()
        return gbps / self.limit_gbps if gbps and self.limit_gbps else None

    def fastest_fraction_of_limit(self) -> float | None:
        """The native op's fastest round over the limit: above 1 would mean
        that some call moved the bytes faster than every way ever did."""
        if not self.limit_gbps or not self.bytes_moved or "native" not in self.times:
            return None
        return self.bytes_moved / min(self.times["native"]) / 1e9 / self.limit_gbps

    def summary(self) -> dict:
        out = asdict(self)
        out["floor"] = self.floor
        out["median_s"] = {k: self.median(k) for k in self.times}
        out["min_s"] = {k: min(v) for k, v in self.times.items()}
        out["ratio_reference_over_native"] = self.ratio()
        out["ratio_native_over_floor"] = self.over_floor()
        out["native_backward_gbps"] = self.native_gbps()
        out["native_fraction_of_limit"] = self.fraction_of_limit()
        out["native_fastest_round_fraction_of_limit"] = self.fastest_fraction_of_limit()
        return out
