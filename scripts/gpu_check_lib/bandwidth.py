"""Bandwidth: the kernel (out of place and in place) against a copy of the
same bytes on the same device, interleaved repetitions, medians; the target
(kernel >= 0.90 x copy at >= 256 MiB for float32 and float16) is reported,
not enforced."""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from gpu_check_lib.common import log
from gpu_check_lib.values import STORAGE

TARGET_RATIO = 0.90
TARGET_DTYPES = ("float32", "float16")
TARGET_MIN_BYTES = 256 << 20


def run_bandwidth(backend, names, sizes, reps: int, inner: int, deadline: float, rows: list[dict]) -> list[dict]:
    """Appends a row per (dtype, size, mode) to `rows` as it goes and returns it."""
    buffers = None
    for name in names:
        if hasattr(backend, "can_run") and not backend.can_run(name):
            log(f"bandwidth {name}: skipped (no CPU kernel for it without ml_dtypes)")
            continue
        if rows and time.time() > deadline - 60:
            log(f"bandwidth {name}: skipped, time budget nearly spent")
            continue
        if buffers is None:
            buffers = backend.alloc_bytes(max(sizes)), backend.alloc_bytes(max(sizes))
        for nbytes in sizes:
            count = nbytes // np.dtype(STORAGE[name]).itemsize
            src, dst = backend.view(buffers[0], name, count), backend.view(buffers[1], name, count)
            ops = backend.timed_ops(name, src, dst, count * np.dtype(STORAGE[name]).itemsize)
            order = list(ops)
            for op in order:  # warm-up: first launches, clocks up
                backend.time_ms(ops[op], inner)
            times = {op: [] for op in order}
            for rep in range(reps):
                rotation = order[rep % len(order) :] + order[: rep % len(order)]  # interleaved
                for op in rotation:
                    times[op].append(backend.time_ms(ops[op], inner))
            median = {op: statistics.median(values) for op, values in times.items()}
            moved = 2 * nbytes  # read + write, for the kernel and the copy alike
            copy_gbps = moved / (median["copy"] * 1e-3) / 1e9
            for op, mode in (("kernel", "out_of_place"), ("kernel_in_place", "in_place")):
                gbps = moved / (median[op] * 1e-3) / 1e9
                applies = name in TARGET_DTYPES and nbytes >= TARGET_MIN_BYTES
                ratio = gbps / copy_gbps
                rows.append(
                    {
                        "dtype": name,
                        "bytes": nbytes,
                        "elements": count,
                        "mode": mode,
                        "kernel_ms_median": median[op],
                        "kernel_ms_min": min(times[op]),
                        "copy_ms_median": median["copy"],
                        "copy_ms_min": min(times["copy"]),
                        "kernel_GBps": gbps,
                        "copy_GBps": copy_gbps,
                        "ratio": ratio,
                        "target_applies": applies,
                        "meets_target": (ratio >= TARGET_RATIO) if applies else None,
                        "reps": reps,
                        "inner": inner,
                    }
                )
            log(
                f"bandwidth {name} {human_bytes(nbytes)}: copy {copy_gbps:.0f} GB/s, kernel "
                f"{rows[-2]['kernel_GBps']:.0f} GB/s, in place {rows[-1]['kernel_GBps']:.0f} GB/s"
            )
    return rows


def human_bytes(nbytes: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"


def parse_bytes(text: str) -> int:
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    factor = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    number = text[:-1] if text[-1:] in "KMG" else text
    try:
        value = int(float(number) * factor)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 256M, 1G)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"size must be positive: {text!r}")
    return value


def target_verdict(rows: list[dict]) -> dict:
    applicable = [r for r in rows if r["target_applies"]]
    if not applicable:
        return {
            "applies": False,
            "met": None,
            "text": f"target (>= {TARGET_RATIO:.2f} x copy at >= 256 MiB, float32/float16): not measured at such sizes",
        }
    worst = min(applicable, key=lambda r: r["ratio"])
    met = all(r["meets_target"] for r in applicable)
    return {
        "applies": True,
        "met": met,
        "min_ratio": worst["ratio"],
        "worst": {k: worst[k] for k in ("dtype", "bytes", "mode")},
        "text": (
            f"target kernel >= {TARGET_RATIO:.2f} x copy bandwidth at >= 256 MiB for float32 and float16: "
            f"{'MET' if met else 'NOT MET'} (lowest ratio {worst['ratio']:.3f}: {worst['dtype']} "
            f"{human_bytes(worst['bytes'])} {worst['mode']})"
        ),
    }
