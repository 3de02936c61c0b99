"""The regime the benchmark's large sizes run in, and the case that tells it.

A backward that allocates a fresh dx of tens of MiB is bound by page faults
on Linux, not by the kernel: an allocation that large is mapped anew
(glibc maps every allocation above its largest dynamic mmap threshold,
32 MiB on 64-bit, fresh from the kernel, and gives it back when freed), so
every call faults its pages in and the kernel zeroes each one before the
op writes it; with transparent huge pages in `madvise` mode (Ubuntu's
default), TensorFlow's allocator does not ask for huge pages, so that is one
fault per 4 KiB. Every TensorFlow op that makes such an output pays it, the
native op and the pure-Python version's multiply alike. So the command says
which CPU, kernel path, stores and huge-page mode it ran with, and for those
sizes times an in-place case as well: dy made inside the graph, so the
backward may write into its buffer and no output is faulted in.
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from pathlib import Path

import tensorflow as tf

from grad_reverse.bench.measure import Result, interleaved

# From this many output bytes up, a fresh output is faulted in at every call
# (glibc's largest dynamic mmap threshold on 64-bit); the plot shades these sizes.
PAGE_FAULT_BOUND_BYTES = 32 << 20
CPUINFO = Path("/proc/cpuinfo")
HUGE_PAGES = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def page_fault_bound(size: int, dtype: str) -> bool:
    """Whether a fresh output of `size` elements of `dtype` is faulted in at every call."""
    return size * tf.as_dtype(dtype).size >= PAGE_FAULT_BOUND_BYTES


def _cpuinfo_fields(text: str) -> dict[str, str]:
    """The first processor's `key: value` lines of /proc/cpuinfo."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's model name, family and model numbers (a VM may hide the name),
    and the vector instructions that matter to the kernel."""
    try:
        fields = _cpuinfo_fields(cpuinfo if cpuinfo is not None else CPUINFO.read_text())
    except OSError:
        return f"unknown ({platform.machine()}, no /proc/cpuinfo)"
    name = fields.get("model name") or fields.get("Model") or platform.machine()
    numbers = [f"{key} {fields[key]}" for key in ("cpu family", "model") if key in fields]
    flags = set(fields.get("flags", "").split())
    if "avx512f" in flags:
        isa = "AVX-512" + (" with BF16" if "avx512_bf16" in flags else "")
    elif "avx2" in flags:
        isa = "AVX2" + (" + FMA" if "fma" in flags else "") + ", no AVX-512"
    elif flags:
        isa = "no AVX2"
    else:
        isa = platform.machine()
    return f"{name} ({', '.join(numbers + [isa])})" if numbers else f"{name} ({isa})"


def huge_page_mode(path: Path = HUGE_PAGES) -> str:
    """Transparent huge pages' mode (the bracketed word: always, madvise, never)."""
    try:
        text = path.read_text()
    except OSError:
        return "unknown (no transparent_hugepage setting)"
    start, end = text.find("["), text.find("]")
    return text[start + 1 : end] if 0 <= start < end else text.strip()


def describe() -> dict[str, str]:
    """What decides the large sizes' regime on this machine, as text."""
    from grad_reverse import ops
    from grad_reverse._native import calls

    return {
        "cpu": cpu_model(),
        "cpu_path": calls.cpu_path(ops.LIBRARY.cdll),
        "streaming_stores": calls.streaming_stores(ops.LIBRARY.cdll),
        "huge_pages": huge_page_mode(),
    }


def format_machine(machine: dict[str, str]) -> str:
    """The description's lines, above the table."""
    huge = machine["huge_pages"]
    note = {
        "madvise": " (TensorFlow's allocator asks for none: fresh outputs fault in 4 KiB pages)",
        "never": " (fresh outputs fault in 4 KiB pages)",
    }.get(huge, "")
    return "\n".join(
        [
            f"CPU: {machine['cpu']}",
            f"CPU path: {machine['cpu_path']}; streaming stores: {machine['streaming_stores']}",
            f"transparent huge pages: {huge}{note}",
        ]
    )


def in_place_function(layer: Callable, lambda_) -> Callable:
    """tf.function(x, dy) -> dx through `layer`, with the output gradient a
    graph temporary (-dy, the same negation for every implementation), so
    the backward may write into its buffer."""

    @tf.function
    def step(x, dy):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, lambda_)
        return tape.gradient(y, x, output_gradients=tf.negative(dy))

    return step


def case_in_place(size: int, dtype: tf.DType, rounds: int, lambda_kind: str = "variable") -> Result:
    """The in-place counterpart of the tf.function case: no implementation's
    backward needs a fresh output (each call still makes -dy, one fresh
    output for every column alike)."""
    from grad_reverse.bench import cases

    x, dy = cases.inputs(size, dtype)
    lambda_ = cases.make_lambda(lambda_kind)
    calls = {}
    for name, layer in cases.LAYERS.items():
        fn = in_place_function(layer, lambda_)
        calls[name] = lambda fn=fn: fn(x, dy)
    times = interleaved(calls, rounds, rotate=len(calls))
    return Result("in place", "tf.function", size, dtype.name, lambda_kind, times)
