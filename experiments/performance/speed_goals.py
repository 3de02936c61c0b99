"""The CPU speed goals, measured side by side, in both libraries: one table
per library with each goal's ratio, the floor it is measured against, and
whether it was met.

    python experiments/performance/speed_goals.py [--rounds 21] [--libraries release,stable]
        [--sizes 64K,256K,1M,2M,4M,16M,64M] [--json FILE]

Each library runs in a worker process of its own (two libraries that
register the same ops cannot share one), one after the other, each printing
the machine's regime first (CPU, CPU path, streaming stores and why, huge
pages). In a worker, every case times its implementations in interleaved
rounds (`bench.measure.interleaved`, the order rotating each round), and a
ratio is the median of the round-by-round ratios, with its quartiles:

* graph mode, float32, at every size: `tf.function` forward + backward with
  dy passed in (dx is a fresh allocation), a `tf.Variable` lambda;
  pure-Python / native. The floor is the pure-Python version itself (its
  float32 multiply is one TensorFlow kernel that may write into dy's
  buffer); goal: parity within the rounds' quartiles (the upper quartile at
  least 1.0). Where dx may stream (16 MiB and
  up) the native op runs a second time in the same rounds with the other
  streaming-store choice forced, so the table shows what the process's
  choice is worth: the planted slow path. The choice is made, under `auto`,
  by the process's first out-of-place passes of each size class: here in
  untimed rounds of the same calls (without the planted one) right before
  the timed ones, so it is made in the traffic it is then timed in.
* eager 1K forward + backward: native / the floor, `tf.identity` under the
  tape plus one eager multiply of dx by the Variable (the cheapest reversal
  eager code can write). Goal: at most 1.05.
* graph mode, half and bfloat16, 1M and 16M elements: native / the floor, a
  backward that only copies dy into a fresh dx (`tf.raw_ops.DeepCopy`, no
  arithmetic: no backward that writes a fresh dx can be faster). Goal: at
  most 1.05, native within 5 % of the copy. Pure-Python / native and
  pure-Python / copy-only are printed beside it (readings: the pure-Python
  backward computes in float32).
* the bench's DANN-style training step (`bench.cases.case_dann_step`,
  512 x 2048): native / the floor, the same step with no GRL. Goal: at most
  1.01.

These are measurements, not tests: on a shared machine a ratio moves by
10-20 % from run to run; read the quartiles.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

# 2M: the smallest pass split over two threads (cc/compute/parallel_for.h).
DEFAULT_SIZES = "64K,256K,1M,2M,4M,16M,64M"
# dx this large may be written with streaming stores (cpu_paths.h's kStreamingStoresMinBytes).
STREAMING_MIN_BYTES = 16 << 20
HALF_SIZES = (1 << 20, 1 << 24)
# Untimed rounds before a size that may stream: the library's `auto` samples
# the first 30 passes of a size class (cpu_paths.h), one native call a round.
CALIBRATION_ROUNDS = 32
DANN_BATCH, DANN_WIDTH = 512, 2048
# (sense, bound): "parity" is met when the upper quartile reaches the bound.
GOALS = {"graph": ("parity", 1.0), "eager 1K": ("<=", 1.05), "half": ("<=", 1.05), "dann": ("<=", 1.01)}
FLOORS = {
    "graph": "the pure-Python version (1.00)",
    "eager 1K": "tf.identity + one multiply",
    "half": "copy-only backward",
    "dann": "the step with no GRL",
}


def ratio_quartiles(numerator: list[float], denominator: list[float]) -> list[float]:
    """Median, lower and upper quartile of the round-by-round ratios numerator[i] / denominator[i]
    (also two_threads.py's)."""
    ratios = [n / d for n, d in zip(numerator, denominator)]
    low, _, high = statistics.quantiles(ratios, n=4)
    return [statistics.median(ratios), low, high]


def per_round(size: int) -> int:
    """Calls per sample, as the bench's tf.function case takes them."""
    return max(1, min(50, (1 << 18) // size))


def copy_only_backward(x, lambda_):
    """Identity forward; the backward copies dy into a fresh tensor and does
    nothing else (lambda_ unused): one op that reads dy and writes every
    element of a fresh dx, as a GRL's backward must when dy's buffer cannot
    be reused, with no arithmetic."""
    import tensorflow as tf

    @tf.custom_gradient
    def copied(x):
        return tf.identity(x), lambda dy: tf.raw_ops.DeepCopy(x=dy)

    return copied(x)


def worker(rounds: int, sizes: list[int]) -> dict:
    """Every case in this process's library; the figures as a dict."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    import grad_reverse
    from grad_reverse import options, reference
    from grad_reverse._tools import streaming_stores_at
    from grad_reverse.bench import cases, regime
    from grad_reverse.bench.measure import interleaved

    lambda_ = cases.make_lambda("variable")
    out: dict = {"library": grad_reverse.BUILD_INFO["library"]["kind"], "tensorflow": tf.__version__}

    def graph_calls(size, dtype):
        x, dy = cases.inputs(size, dtype)
        native = cases.fwd_bwd_function(grad_reverse.grad_reverse, lambda_)
        ref = cases.fwd_bwd_function(reference.grad_reverse, lambda_)
        return x, dy, native, ref

    # The library's choice is switched only where a call needs another one than
    # the last call's: a switch is a ctypes call (about 20 us here) that would
    # otherwise weigh on every small call of both sides and pull their ratio
    # towards 1.
    stores = {"mode": "auto"}

    def set_stores(mode):
        if stores["mode"] != mode:
            options.set_streaming_stores(mode)
            stores["mode"] = mode

    def with_stores(mode, fn, *args):
        def call():
            set_stores(mode)
            return fn(*args)

        return call

    def settle_stores(calls, dx_bytes):
        """Lets `auto` decide for dx's size class, if dx may stream at all, in
        the traffic the timed rounds have: `calls` in turn, untimed, until the
        class's samples are taken."""
        if dx_bytes >= STREAMING_MIN_BYTES:
            interleaved(calls, CALIBRATION_ROUNDS, rotate=len(calls))
            assert streaming_stores_at(dx_bytes) is not None, "the calibration did not end"

    def plant_slow_path(calls, dx_bytes, native, x, dy):
        """Adds the native op with the other streaming-store choice than the
        one the library made for dx's size, if dx may stream."""
        if dx_bytes >= STREAMING_MIN_BYTES:
            other = "off" if streaming_stores_at(dx_bytes) else "on"
            calls[f"native, streaming stores {other}"] = with_stores(other, native, x, dy)

    def against_reference(times):
        """reference/native, then reference/(each other call)."""
        row = {"reference/native": ratio_quartiles(times["reference"], times["native"])}
        for name in times:
            if name not in ("reference", "native"):
                row[f"reference/({name})"] = ratio_quartiles(times["reference"], times[name])
        return row

    graph = {}
    for size in sizes:
        x, dy, native, ref = graph_calls(size, tf.float32)
        calls = {"native": with_stores("auto", native, x, dy), "reference": with_stores("auto", ref, x, dy)}
        settle_stores(calls, 4 * size)
        plant_slow_path(calls, 4 * size, native, x, dy)
        settle = cases.SETTLING_CALLS if cases.fits_cache(size, tf.float32) else 0
        times = interleaved(calls, rounds, per_round(size), settle=settle, rotate=len(calls))
        row = against_reference(times)
        row["native ms"] = statistics.median(times["native"]) * 1e3
        graph[size] = row
    set_stores("auto")
    out["graph"] = graph

    x, dy = cases.inputs(1024, tf.float32)

    def eager_floor():
        dx = cases.fwd_bwd(cases.LAYERS["identity"], x, dy, lambda_)
        return tf.multiply(dx, lambda_)

    times = interleaved(
        {"native": lambda: cases.fwd_bwd(grad_reverse.grad_reverse, x, dy, lambda_), "floor": eager_floor},
        rounds,
        50,
        settle=cases.SETTLING_CALLS,
        rotate=2,
    )
    out["eager 1K"] = {
        "native/floor": ratio_quartiles(times["native"], times["floor"]),
        "native us": statistics.median(times["native"]) * 1e6,
    }

    half = {}
    for dtype in (tf.float16, tf.bfloat16):
        for size in HALF_SIZES:
            x, dy, native, ref = graph_calls(size, dtype)
            copy = cases.fwd_bwd_function(copy_only_backward, lambda_)
            calls = {
                "native": with_stores("auto", native, x, dy),
                "reference": with_stores("auto", ref, x, dy),
                "copy-only backward": with_stores("auto", copy, x, dy),
            }
            settle_stores(calls, 2 * size)
            plant_slow_path(calls, 2 * size, native, x, dy)
            times = interleaved(calls, rounds, per_round(size), rotate=len(calls))
            row = {"native/copy-only backward": ratio_quartiles(times["native"], times["copy-only backward"])}
            half[f"{dtype.name} {size}"] = {**row, **against_reference(times)}
    set_stores("auto")
    out["half"] = half
    out["regime"] = regime.describe()  # with the verdicts the cases above found

    dann = cases.case_dann_step(DANN_BATCH, DANN_WIDTH, rounds)
    out["dann"] = {"native/no GRL": ratio_quartiles(dann.times["native"], dann.times["no GRL"])}
    return out


def _met(goal: str, figures: list[float]) -> str:
    """Whether `figures` (median, lower and upper quartile of a ratio) meet `goal`."""
    sense, bound = GOALS[goal]
    median, _, high = figures
    if sense == "parity":
        ok, wanted = high >= bound, f"parity: upper quartile >= {bound}"
    else:
        ok, wanted = (median >= bound if sense == ">=" else median <= bound), f"{sense} {bound}"
    return f"{'met' if ok else 'NOT met'} ({wanted})"


def _cell(figures: list[float]) -> str:
    median, low, high = figures
    return f"{median:.2f} [{low:.2f}-{high:.2f}]"


def report(result: dict) -> str:
    from grad_reverse.bench import regime, table

    lines = [
        f"## {result['library']} library, TensorFlow {result['tensorflow']}",
        regime.format_machine(result["regime"]),
        "",
        "| case | ratio, median [quartiles] | floor | goal |",
        "|---|---|---|---|",
    ]
    for size, row in result["graph"].items():
        label = table.size_label(int(size))
        for name, figures in row.items():
            if name == "native ms":
                continue
            if name == "reference/native":
                lines.append(
                    f"| graph float32 {label}: {name} | {_cell(figures)} | {FLOORS['graph']} | {_met('graph', figures)} |"
                )
            else:
                lines.append(f"| graph float32 {label}: {name} | {_cell(figures)} | | (planted slow path) |")
    eager = result["eager 1K"]["native/floor"]
    lines.append(f"| eager 1K: native/floor | {_cell(eager)} | {FLOORS['eager 1K']} | {_met('eager 1K', eager)} |")
    for name, row in result["half"].items():
        dtype, size = name.split()
        label = f"graph {dtype} {table.size_label(int(size))}"
        floor = f"{FLOORS['half']} (pure-Python/copy {_cell(row['reference/(copy-only backward)'])})"
        for ratio, figures in row.items():
            if ratio == "native/copy-only backward":
                lines.append(f"| {label}: {ratio} | {_cell(figures)} | {floor} | {_met('half', figures)} |")
            elif ratio != "reference/(copy-only backward)":  # in the floor's cell
                goal = "(planted slow path)" if "streaming stores" in ratio else "(a reading)"
                lines.append(f"| {label}: {ratio} | {_cell(figures)} | | {goal} |")
    dann = result["dann"]["native/no GRL"]
    lines.append(
        f"| DANN step {DANN_BATCH}x{DANN_WIDTH}: native/no GRL | {_cell(dann)} | {FLOORS['dann']} | {_met('dann', dann)} |"
    )
    return "\n".join(lines)


def main() -> None:
    from grad_reverse.bench import table

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--libraries", default="release,stable", help="comma-separated: release, stable")
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help=table.SIZES_HELP)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    sizes = table.parse_sizes(args.sizes)
    results = []
    for kind in args.libraries.split(","):
        env = dict(os.environ, GRAD_REVERSE_LIBRARY=kind, TF_CPP_MIN_LOG_LEVEL="2")
        command = [sys.executable, __file__, "--worker", str(args.rounds), ",".join(map(str, sizes))]
        answer = subprocess.run(command, env=env, text=True, capture_output=True)
        if answer.returncode != 0:
            raise SystemExit(f"the {kind} worker failed:\n{answer.stderr[-4000:]}")
        result = json.loads(answer.stdout.strip().splitlines()[-1])
        if result["library"] != kind:
            raise SystemExit(f"the {kind} worker loaded the {result['library']} library")
        results.append(result)
        print(report(result), f"\nload {os.getloadavg()[0]:.2f}; {args.rounds} rounds\n", flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        print(json.dumps(worker(int(sys.argv[2]), [int(s) for s in sys.argv[3].split(",")])))
    else:
        main()
