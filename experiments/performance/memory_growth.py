"""Resident memory across many eager forward+backward calls of grad_reverse.

    python experiments/performance/memory_growth.py              # 100k calls (target: < 10 MB growth)
    python experiments/performance/memory_growth.py --calls 10000

After a warm-up (TensorFlow's caches, the allocator's pools and the op's
eager lambda-constant cache fill up then), it runs `--calls` eager calls of
forward + backward (GradientTape, dy given), each with a lambda from a
schedule of `--lambdas` distinct values (more than the 256 the package
caches, so that cache's bound is exercised too), and reports the growth of the
process's resident set size (RSS) from after the warm-up to the end, with
samples in between: a leak shows as a steady climb, allocator noise as a
plateau. Exit status 1 when the growth exceeds `--max-growth-mb`.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import grad_reverse  # noqa: E402
from grad_reverse import reference  # noqa: E402


def rss_mb() -> float:
    """Current resident set size in MB (Linux /proc; elsewhere the peak, from getrusage)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        import resource

        scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def step(x: tf.Tensor, dy: tf.Tensor, lambda_: float) -> tf.Tensor:
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = grad_reverse.grad_reverse(x, lambda_)
    return tape.gradient(y, x, output_gradients=dy)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=100_000, help="measured calls (default 100000)")
    parser.add_argument("--warmup", type=int, default=5_000, help="calls before the first measurement")
    parser.add_argument("--size", type=int, default=1024, help="elements per tensor")
    parser.add_argument("--dtype", default="float32", choices=[d.name for d in grad_reverse.SUPPORTED_DTYPES])
    parser.add_argument("--lambdas", type=int, default=1000, help="distinct lambda values, cycled")
    parser.add_argument("--samples", type=int, default=10, help="RSS samples during the measured calls")
    parser.add_argument("--max-growth-mb", type=float, default=10.0, help="target (exit 1 above it)")
    args = parser.parse_args(argv)

    dtype = tf.as_dtype(args.dtype)
    x = tf.cast(tf.random.stateless_normal([args.size], seed=[1, 2]), dtype)
    dy = tf.cast(tf.random.stateless_normal([args.size], seed=[3, 4]), dtype)
    schedule = [2.0 * k / args.lambdas for k in range(args.lambdas)]  # 0 .. 2, like a DANN schedule

    began = time.perf_counter()
    for i in range(args.warmup):
        step(x, dy, schedule[i % args.lambdas])
    # The calls must compute what they should, or the figure means nothing.
    check = schedule[-1]
    tf.debugging.assert_equal(step(x, dy, check), reference.reverse_gradient(dy, tf.constant(check)))
    gc.collect()
    start_mb = rss_mb()
    print(
        f"grad_reverse {grad_reverse.__version__}, TensorFlow {tf.__version__}: eager forward+backward, "
        f"{args.size} x {args.dtype}, {args.lambdas} distinct lambdas"
    )
    print(f"after {args.warmup} warm-up calls: RSS {start_mb:.1f} MB")

    every = max(1, args.calls // max(1, args.samples))
    measured = time.perf_counter()
    for i in range(args.calls):
        step(x, dy, schedule[(args.warmup + i) % args.lambdas])
        if (i + 1) % every == 0 or i + 1 == args.calls:
            gc.collect()
            now_mb = rss_mb()
            print(f"  {i + 1:>8d} calls: RSS {now_mb:8.1f} MB ({now_mb - start_mb:+.1f} MB)")
    seconds = time.perf_counter() - measured
    growth = rss_mb() - start_mb
    print(
        f"RSS growth after {args.calls} calls: {growth:+.1f} MB (target < {args.max_growth_mb:g} MB); "
        f"{seconds:.1f} s measured ({seconds / max(args.calls, 1) * 1e6:.0f} us per call), "
        f"{time.perf_counter() - began:.1f} s in all"
    )
    return 0 if growth < args.max_growth_mb else 1


if __name__ == "__main__":
    sys.exit(main())
