"""Where the time of the bench's "chain" case goes, node by node, after
Grappler: h = 2x; y = GRL(h, lambda); loss = sum(y*y); d loss / dx.

    python experiments/performance/chain_profile.py [--size 16M] [--lambda variable|float] [--runs 9]

Builds the chain graph for the native op, the pure-Python version and
tf.identity, runs it with `RunOptions.FULL_TRACE` (TensorFlow's per-node
step stats, after Grappler rewrote the graph) and prints each node that
takes at least 1% of the step, with the median of `--runs` traced runs.
Each printed node is one pass over the tensor; the difference between the
implementations is the passes they add.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import grad_reverse  # noqa: E402
from grad_reverse import reference  # noqa: E402
from grad_reverse.bench.allocations import native_stderr_captured  # noqa: E402
from grad_reverse.bench.table import parse_size, size_label  # noqa: E402

LAYERS = {
    "native": grad_reverse.grad_reverse,
    "reference": reference.grad_reverse,
    "identity": lambda t, _: tf.identity(t),
}


def profile(layer, size: int, kind: str, runs: int) -> dict[str, float]:
    """Median microseconds per node label ("name = Op(inputs)") over `runs` traced runs."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [size])
        lambda_ = tf.Variable(0.5, trainable=False) if kind == "variable" else 0.5
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(2.0 * x, lambda_)
            loss = tf.reduce_sum(y * y)
        dx = tape.gradient(loss, x)[:1]
        init = tf.compat.v1.global_variables_initializer()
    feed = {x: np.ones(size, np.float32)}
    samples: dict[str, list[float]] = collections.defaultdict(list)
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(init)
        for _ in range(3):
            session.run(dx, feed)
        for _ in range(runs):
            metadata = tf.compat.v1.RunMetadata()
            options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
            with native_stderr_captured():
                session.run(dx, feed, options=options, run_metadata=metadata)
            for device in metadata.step_stats.dev_stats:
                for node in device.node_stats:
                    samples[node.timeline_label or node.node_name].append(node.all_end_rel_micros)
    return {label: statistics.median(v) for label, v in samples.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=parse_size, default=1 << 24, help="elements: 1M, 16M, ...")
    parser.add_argument("--lambda", dest="kind", choices=("variable", "float"), default="variable")
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args(argv)
    for name, layer in LAYERS.items():
        nodes = profile(layer, args.size, args.kind, args.runs)
        total = sum(nodes.values())
        big = sorted(((t, label) for label, t in nodes.items() if t >= 0.01 * total), reverse=True)
        print(
            f"{name} ({size_label(args.size)} float32, {args.kind} lambda): sum of node medians "
            f"{total / 1e3:.2f} ms, {len(big)} nodes of 1% or more:"
        )
        for micros, label in big:
            print(f"  {micros / 1e3:7.2f} ms  {label[:140]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
