"""`python -m grad_reverse bench`: the native op against the pure-Python
version (`tf.custom_gradient`) and plain `tf.identity`, side by side.

Every case times its implementations in one run, interleaved (a round of each
implementation, repeated), and reports the median and min per call, the ratio
reference/native of the medians, and for bandwidth-bound cases the effective
bandwidth of the backward next to this machine's limit measured in the same
run (numpy `multiply(a, s, out=b)` over the same bytes; a device copy on GPU).
Ratios measured side by side are what to read: absolute times on a shared
machine drift.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf

import grad_reverse
from grad_reverse import reference

IMPLEMENTATIONS = ("native", "reference", "identity")
FULL_SIZES = (1 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 26)
QUICK_SIZES = (1 << 10, 1 << 20, 1 << 24)


def _identity(x, lambda_):
    """The floor: what a layer that does nothing costs (no reversal)."""
    del lambda_
    return tf.identity(x)


LAYERS: dict[str, Callable] = {
    "native": grad_reverse.grad_reverse,
    "reference": reference.grad_reverse,
    "identity": _identity,
}


@dataclass
class Result:
    case: str
    mode: str
    size: int
    dtype: str
    times: dict[str, list[float]] = field(default_factory=dict)  # seconds per call
    bytes_moved: int = 0  # by the backward (read dy + write dx); 0 if not bandwidth-bound
    limit_gbps: Optional[float] = None

    def median(self, impl: str) -> float:
        return statistics.median(self.times[impl])

    def ratio(self) -> Optional[float]:
        if "reference" in self.times and "native" in self.times:
            return self.median("reference") / self.median("native")
        return None

    def native_gbps(self) -> Optional[float]:
        if not self.bytes_moved or "native" not in self.times:
            return None
        return self.bytes_moved / self.median("native") / 1e9

    def summary(self) -> dict:
        out = asdict(self)
        out["median_s"] = {k: self.median(k) for k in self.times}
        out["min_s"] = {k: min(v) for k, v in self.times.items()}
        out["ratio_reference_over_native"] = self.ratio()
        out["native_backward_gbps"] = self.native_gbps()
        return out


def _sync() -> None:
    if tf.config.list_logical_devices("GPU"):
        tf.test.experimental.sync_devices()


def interleaved(calls: dict[str, Callable[[], object]], rounds: int, per_round: int = 1) -> dict[str, list[float]]:
    """Times each callable `rounds` times, one round of all of them at a time,
    each sample the mean of `per_round` back-to-back calls. Warms up first."""
    for fn in calls.values():
        fn()
    _sync()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            start = time.perf_counter()
            for _ in range(per_round):
                fn()
            _sync()
            times[name].append((time.perf_counter() - start) / per_round)
    return times


def memory_limit_gbps(size: int, dtype: tf.DType, rounds: int) -> float:
    """Read+write bandwidth of the machine on `size` elements: numpy's
    in-place-style multiply on the CPU (what a perfect backward does), a
    device-to-device copy on a GPU."""
    nbytes = size * dtype.size
    if tf.config.list_logical_devices("GPU"):
        src = tf.zeros([size], dtype)
        copy = tf.function(lambda t: tf.identity(t + tf.zeros([], dtype)))
        seconds = statistics.median(interleaved({"copy": lambda: copy(src)}, rounds)["copy"])
        return 2 * nbytes / seconds / 1e9
    a = np.ones(size, dtype.as_numpy_dtype)
    b = np.empty_like(a)
    scale = a.dtype.type(-0.5)
    seconds = statistics.median(interleaved({"numpy": lambda: np.multiply(a, scale, out=b)}, rounds)["numpy"])
    return 2 * nbytes / seconds / 1e9


def fwd_bwd(layer: Callable, x, dy, lambda_):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, lambda_)
    return tape.gradient(y, x, output_gradients=dy)


def case_eager(size: int, dtype: tf.DType, rounds: int) -> Result:
    """Eager forward + backward: where dispatch cost dominates small tensors."""
    x = tf.random.normal([size], dtype=tf.float32)
    x, dy = tf.cast(x, dtype), tf.cast(tf.random.normal([size]), dtype)
    calls = {name: (lambda layer=layer: fwd_bwd(layer, x, dy, 0.5)) for name, layer in LAYERS.items()}
    per_round = max(1, min(50, (1 << 20) // max(size, 1)))
    return Result("fwd+bwd", "eager", size, dtype.name, interleaved(calls, rounds, per_round))


def fwd_bwd_function(layer: Callable, lambda_, jit: bool = False):
    """tf.function(x, dy) -> dx through `layer` (one trace per layer)."""

    def step(x, dy):
        return fwd_bwd(layer, x, dy, lambda_)

    return tf.function(step, jit_compile=jit)


def case_function(size: int, dtype: tf.DType, rounds: int, jit: bool = False) -> Result:
    """tf.function forward + backward with dy passed in (so dx cannot reuse
    dy's buffer: the call includes allocating dx)."""
    x = tf.cast(tf.random.normal([size]), dtype)
    dy = tf.cast(tf.random.normal([size]), dtype)
    lambda_ = tf.Variable(0.5)
    calls = {}
    for name, layer in LAYERS.items():
        fn = fwd_bwd_function(layer, lambda_, jit)
        calls[name] = lambda fn=fn: fn(x, dy)
    per_round = max(1, min(50, (1 << 18) // max(size, 1)))
    result = Result("fwd+bwd", "xla" if jit else "tf.function", size, dtype.name, interleaved(calls, rounds, per_round))
    result.bytes_moved = 2 * size * dtype.size
    return result


def kernel_bandwidth(size: int, dtype: tf.DType, rounds: int) -> tuple[float, float]:
    """(native backward kernel, numpy) in-place bandwidth in GB/s, read+write.

    The kernel alone: a graph applies GradReverseGrad to a temporary 1 and 9
    times in a row (each application in place); the difference is 8 passes
    of the kernel, with no allocation and no other op. numpy: multiply(a, s,
    out=a) on the same bytes."""
    from grad_reverse.ops import _library

    lambda_ = tf.constant(0.5)

    def repeated(times: int):
        @tf.function
        def apply(x):
            t = x + tf.constant(0, dtype)  # a temporary the kernel may overwrite
            for _ in range(times):
                t = _library.grad_reverse_grad(t, lambda_)
            return t[:1]

        return apply

    x = tf.cast(tf.random.normal([size]), dtype)
    one, nine = repeated(1), repeated(9)
    a = np.ones(size, dtype.as_numpy_dtype)
    scale = a.dtype.type(-0.5)
    times = interleaved({"one": lambda: one(x), "nine": lambda: nine(x),
                         "numpy": lambda: np.multiply(a, scale, out=a)}, rounds)
    nbytes = 2 * size * dtype.size
    kernel = (statistics.median(times["nine"]) - statistics.median(times["one"])) / 8
    return nbytes / kernel / 1e9, nbytes / statistics.median(times["numpy"]) / 1e9


def case_chain(size: int, dtype: tf.DType, rounds: int) -> Result:
    """dy produced inside the graph: h = 2x; y = GRL(h, variable); loss = sum(y*y); d loss/dx."""
    x = tf.cast(tf.random.normal([size]), dtype)
    lambda_ = tf.Variable(0.5)
    calls = {}
    for name, layer in LAYERS.items():

        @tf.function
        def chain(x, layer=layer):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = layer(2.0 * x, lambda_)
                loss = tf.reduce_sum(y * y)
            return tape.gradient(loss, x)

        calls[name] = lambda fn=chain: fn(x)
    return Result("chain", "tf.function", size, dtype.name, interleaved(calls, rounds))


def case_dann_step(batch: int, width: int, rounds: int) -> Result:
    """A DANN-style training step: Dense(width)-ReLU-GRL-Dense(width)-ReLU-Dense(1), SGD."""
    import keras

    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((batch, width)), tf.float32)
    y = tf.constant(rng.integers(0, 2, (batch, 1)), tf.float32)
    calls = {}
    for name, layer in LAYERS.items():
        keras.utils.set_random_seed(0)
        grl = keras.layers.Lambda(lambda t, layer=layer: layer(t, 1.0)) if name != "identity" else keras.layers.Identity()
        model = keras.Sequential([
            keras.Input((width,)),
            keras.layers.Dense(width, activation="relu"),
            grl,
            keras.layers.Dense(width, activation="relu"),
            keras.layers.Dense(1),
        ])
        optimizer = keras.optimizers.SGD(1e-4)
        loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)

        @tf.function
        def step(model=model, optimizer=optimizer):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        calls[name if name != "identity" else "no GRL"] = step
    return Result("dann step", "tf.function", batch, "float32", interleaved(calls, rounds))


def backward_allocations(impl: str, size: int, dtype: tf.DType = tf.float32) -> int:
    """Bytes that the backward's own nodes allocate for one step, read from
    TensorFlow's per-node allocation records (a traced Session run). `dy` is a
    temporary made in the graph (x + 1), so an in-place backward needs none."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(dtype, [size])
        y = LAYERS[impl](x, 0.5)
        with tf.name_scope("make_dy"):
            dy = x + tf.constant(1, dtype)
        (dx,) = tf.compat.v1.gradients(y, x, grad_ys=dy, name="backward")
        total = tf.reduce_sum(tf.cast(dx, tf.float32))
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    metadata = tf.compat.v1.RunMetadata()
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(total, {x: np.ones(size, dtype.as_numpy_dtype)}, options=options, run_metadata=metadata)
    return sum(
        memory.total_bytes
        for device in metadata.step_stats.dev_stats
        for node in device.node_stats
        if node.node_name.startswith("backward")
        for memory in node.memory
    )


def format_table(results: Sequence[Result]) -> str:
    header = (f"{'case':10s} {'mode':12s} {'size':>9s} {'dtype':8s} {'native ms':>10s} {'ref ms':>10s} "
              f"{'floor ms':>10s} {'ref/native':>10s} {'bwd GB/s':>9s} {'limit GB/s':>10s}")
    lines = [header, "-" * len(header)]
    for r in results:
        floor = r.times.get("identity") or r.times.get("no GRL")
        ratio, gbps = r.ratio(), r.native_gbps()
        lines.append(
            f"{r.case:10s} {r.mode:12s} {_size_label(r.size):>9s} {r.dtype:8s} "
            f"{r.median('native') * 1e3:10.4f} {r.median('reference') * 1e3:10.4f} "
            f"{statistics.median(floor) * 1e3 if floor else float('nan'):10.4f} "
            f"{ratio if ratio else float('nan'):10.2f} "
            f"{gbps if gbps else float('nan'):9.1f} {r.limit_gbps if r.limit_gbps else float('nan'):10.1f}"
        )
    return "\n".join(lines)


def _size_label(n: int) -> str:
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def plot(results: Sequence[Result], path: Path) -> None:
    """Time vs size, log-log, one line per implementation and mode, with the
    bandwidth limit as the time a perfect backward would take."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    for mode, style in (("eager", ":"), ("tf.function", "-"), ("xla", "--")):
        rows = sorted((r for r in results if r.case == "fwd+bwd" and r.mode == mode), key=lambda r: r.size)
        if not rows:
            continue
        for impl, color in zip(IMPLEMENTATIONS, ("tab:blue", "tab:orange", "tab:gray")):
            ax.plot([r.size for r in rows], [r.median(impl) for r in rows], style, color=color, marker="o",
                    markersize=3, label=f"{impl} ({mode})")
    limit_rows = sorted((r for r in results if r.limit_gbps), key=lambda r: r.size)
    if limit_rows:
        ax.plot([r.size for r in limit_rows], [r.bytes_moved / (r.limit_gbps * 1e9) for r in limit_rows],
                color="black", linewidth=2, alpha=0.5, label="memory-bandwidth limit")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("elements")
    ax.set_ylabel("seconds per forward+backward (median)")
    ax.set_title("grad-reverse: native op vs tf.custom_gradient vs tf.identity")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(quick: bool = False, dtype: str = "float32", out: Optional[str] = None, sizes: Optional[Sequence[int]] = None,
        rounds: Optional[int] = None, progress: bool = True, memory: bool = True, dann: bool = True) -> list[Result]:
    """Runs every case and prints the table; returns the results."""
    import keras

    tf_dtype = tf.as_dtype(dtype)
    sizes = tuple(sizes or (QUICK_SIZES if quick else FULL_SIZES))
    rounds = rounds or (9 if quick else 41)
    plan: list[tuple[str, Callable[[], Result]]] = []
    for size in sizes:
        plan.append((f"eager {size}", lambda s=size: case_eager(s, tf_dtype, rounds)))
        plan.append((f"function {size}", lambda s=size: case_function(s, tf_dtype, rounds)))
        plan.append((f"xla {size}", lambda s=size: case_function(s, tf_dtype, rounds, jit=True)))
    chain_size = 1 << 24 if max(sizes) >= (1 << 24) else max(sizes)
    plan.append(("chain", lambda: case_chain(chain_size, tf_dtype, max(3, rounds // 2))))
    if dann:
        plan.append(("dann", lambda: case_dann_step(512 if not quick else 256, 2048 if not quick else 1024, max(3, rounds // 2))))
    bar = keras.utils.Progbar(len(plan), unit_name="case") if progress else None
    results: list[Result] = []
    limits: dict[int, float] = {}
    for i, (name, make) in enumerate(plan):
        result = make()
        if result.bytes_moved:
            if result.size not in limits:
                limits[result.size] = memory_limit_gbps(result.size, tf_dtype, rounds)
            result.limit_gbps = limits[result.size]
        results.append(result)
        if bar:
            bar.update(i + 1, finalize=i + 1 == len(plan))
    print()
    print(format_table(results))
    kernel_rows = []
    for size in (s for s in sizes if s >= (1 << 20)):
        native_gbps, numpy_gbps = kernel_bandwidth(size, tf_dtype, rounds)
        kernel_rows.append({"size": size, "native_gbps": native_gbps, "numpy_gbps": numpy_gbps})
    if kernel_rows:
        print("\nbackward kernel alone, in place (read+write GB/s), vs numpy multiply(a, s, out=a):")
        for row in kernel_rows:
            print(f"  {_size_label(row['size']):>5s} {dtype}: native {row['native_gbps']:6.1f}  numpy {row['numpy_gbps']:6.1f}"
                  f"  ratio {row['native_gbps'] / row['numpy_gbps']:.2f}")
    allocations = {}
    if memory:
        size = 1 << 24
        allocations = {impl: backward_allocations(impl, size, tf_dtype) for impl in ("native", "reference")}
        print(f"\nbytes allocated by the backward (tf.function, dy a graph temporary, {_size_label(size)} {dtype}, "
              f"{size * tf_dtype.size / 2**20:.0f} MiB per tensor): "
              + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in allocations.items()))
    if out:
        directory = Path(out)
        directory.mkdir(parents=True, exist_ok=True)
        payload = {
            "tensorflow": tf.__version__, "grad_reverse": grad_reverse.__version__, "dtype": dtype,
            "cpu_count": os.cpu_count(), "gpus": [d.name for d in tf.config.list_logical_devices("GPU")],
            "results": [r.summary() for r in results], "backward_allocated_bytes": allocations,
            "kernel_in_place_bandwidth": kernel_rows,
        }
        (directory / "bench.json").write_text(json.dumps(payload, indent=2))
        try:
            plot(results, directory / "bench.png")
            print(f"wrote {directory / 'bench.json'} and {directory / 'bench.png'}")
        except ImportError:
            print(f"wrote {directory / 'bench.json'} (install matplotlib, or grad-reverse[bench], for the plot)")
    return results


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--sizes takes comma-separated element counts, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"--sizes must be positive element counts, got {text!r}")
    return sizes


def add_cli(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("bench", help="time the native op against tf.custom_gradient and tf.identity")
    parser.add_argument("--quick", action="store_true", help="fewer sizes and rounds (under a minute)")
    parser.add_argument("--dtype", default="float32", choices=[d.name for d in grad_reverse.SUPPORTED_DTYPES])
    parser.add_argument("--out", metavar="DIR", help="write bench.json and bench.png here")
    parser.add_argument("--sizes", type=_sizes, help="comma-separated element counts (default: 1K to 64M)")
    parser.add_argument("--rounds", type=int, help="interleaved rounds per case")
    parser.add_argument("--no-memory", action="store_true", help="skip the backward-allocation measurement")
    parser.add_argument("--no-dann", action="store_true", help="skip the DANN training-step case")

    def run_cli(args: argparse.Namespace) -> int:
        run(args.quick, args.dtype, args.out, sizes=args.sizes, rounds=args.rounds,
            memory=not args.no_memory, dann=not args.no_dann)
        return 0

    parser.set_defaults(run=run_cli)
