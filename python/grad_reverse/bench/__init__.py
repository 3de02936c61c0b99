"""`python -m grad_reverse bench`: the native op against the pure-Python
version (`tf.custom_gradient`) and a floor that does no reversal, side by side.

Every case times its implementations in one run, interleaved (a round of each
implementation, repeated), with lambda as a `tf.Variable` (what a schedule
uses) and as a Python float. The table gives median times per call, the
ratios reference/native and native/floor taken round by round, and for
bandwidth-bound cases the backward's GB/s next to this machine's limit,
timed in the same rounds as the case (the fastest pass of threaded copies,
in-place passes, the kernel's own pass and TensorFlow's own multiply over the
same bytes). Ratios
measured side by side are what to read: absolute times on a shared machine
drift.

Modules: `measure` (interleaved timing, `Result`), `cases` (what is timed),
`limit` (the bandwidth limit, the kernel alone), `allocations` (bytes the
backward allocates), `regime` (the CPU, stores and huge-page mode it ran
with; the in-place case where a fresh dx is page-fault bound), `table`
(the printed table), `settings` (what needs no TensorFlow: dtypes, sizes as written), `plot` (bench.png), `arguments` (the
command's options, without TensorFlow), `cli` (the command).
"""

import importlib
from typing import Any

from grad_reverse.bench.arguments import add_cli
from grad_reverse.bench.settings import parse_sizes, size_label

# Loaded on first use: these modules import TensorFlow, `add_cli` does not (`bench --help` answers at once).
_LAZY = {
    "IMPLEMENTATIONS": "cases",
    "LAMBDA_KINDS": "cases",
    "case_chain": "cases",
    "case_dann_step": "cases",
    "case_eager": "cases",
    "case_function": "cases",
    "backward_allocations": "allocations",
    "run": "cli",
    "kernel_bandwidth": "limit",
    "measure_limit": "limit",
    "Result": "measure",
    "interleaved": "measure",
}

__all__ = ["add_cli", "parse_sizes", "size_label", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f"grad_reverse.bench.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'grad_reverse.bench' has no attribute '{name}'")


def __dir__() -> list:
    return sorted(set(globals()) | set(_LAZY))
