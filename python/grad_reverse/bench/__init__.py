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
(sizes and the printed table), `plot` (bench.png), `cli` (the command).
"""

from grad_reverse.bench.allocations import backward_allocations
from grad_reverse.bench.cases import (
    IMPLEMENTATIONS,
    LAMBDA_KINDS,
    case_chain,
    case_dann_step,
    case_eager,
    case_function,
)
from grad_reverse.bench.cli import add_cli, run
from grad_reverse.bench.limit import kernel_bandwidth, measure_limit
from grad_reverse.bench.measure import Result, interleaved
from grad_reverse.bench.table import parse_sizes, size_label

__all__ = [
    "IMPLEMENTATIONS",
    "LAMBDA_KINDS",
    "Result",
    "add_cli",
    "backward_allocations",
    "case_chain",
    "case_dann_step",
    "case_eager",
    "case_function",
    "interleaved",
    "kernel_bandwidth",
    "measure_limit",
    "parse_sizes",
    "run",
    "size_label",
]
