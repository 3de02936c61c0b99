"""Where an eager call of grad_reverse spends its time, with a Variable lambda
and with a float one, on a small tensor (dispatch-bound).

    python experiments/performance/eager_overhead.py [--size 1024] [--rounds 30] [--calls 200]

Part 1 times the pieces of a forward call on their own: reading a Variable
the ways Python can (`tf.convert_to_tensor`, `value()`), the op called with a
constant, with the Variable itself (the generated wrapper then reads it in
C), and `grad_reverse` with each kind of lambda. Part 2 times forward +
backward of the native op, the pure-Python version and the floors
(`tf.identity`, and `tf.identity` plus one `value()` read of the Variable),
and prints the ratios round by round (median). All interleaved, as the bench.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import grad_reverse  # noqa: E402
from grad_reverse import reference  # noqa: E402
from grad_reverse.bench.cases import fwd_bwd  # noqa: E402
from grad_reverse.bench.measure import interleaved, paired_ratio  # noqa: E402
from grad_reverse.ops import LIBRARY  # noqa: E402

RATIOS = (
    ("reference, Variable", "native, Variable"),
    ("native, Variable", "identity + read"),
    ("reference, float", "native, float"),
    ("native, float", "identity"),
    ("native, Variable", "native, float"),
)


def report(times: dict[str, list[float]]) -> None:
    for name, samples in times.items():
        print(f"  {name:34s} median {statistics.median(samples) * 1e6:8.1f} µs   min {min(samples) * 1e6:8.1f} µs")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=200, help="calls per sample")
    args = parser.parse_args(argv)

    x = tf.random.normal([args.size])
    dy = tf.random.normal([args.size])
    variable = tf.Variable(1.5, trainable=False)
    constant = tf.constant(1.5)

    def identity_and_read(t, lambda_):
        lambda_.value()
        return tf.identity(t)

    print(f"forward pieces ({args.size} float32, {args.calls} calls per sample, {args.rounds} rounds):")
    report(
        interleaved(
            {
                "tf.convert_to_tensor(variable)": lambda: tf.convert_to_tensor(variable),
                "variable.value()": lambda: variable.value(),
                "op(x, constant)": lambda: LIBRARY.module.grad_reverse(x, constant),
                "op(x, variable): read in C": lambda: LIBRARY.module.grad_reverse(x, variable),
                "grad_reverse(x, 1.5)": lambda: grad_reverse.grad_reverse(x, 1.5),
                "grad_reverse(x, variable)": lambda: grad_reverse.grad_reverse(x, variable),
                "tf.identity(x)": lambda: tf.identity(x),
            },
            args.rounds,
            args.calls,
        )
    )

    print("forward + backward:")
    times = interleaved(
        {
            "native, Variable": lambda: fwd_bwd(grad_reverse.grad_reverse, x, dy, variable),
            "reference, Variable": lambda: fwd_bwd(reference.grad_reverse, x, dy, variable),
            "identity + read": lambda: fwd_bwd(identity_and_read, x, dy, variable),
            "native, float": lambda: fwd_bwd(grad_reverse.grad_reverse, x, dy, 1.5),
            "reference, float": lambda: fwd_bwd(reference.grad_reverse, x, dy, 1.5),
            "identity": lambda: fwd_bwd(lambda t, _: tf.identity(t), x, dy, None),
        },
        args.rounds,
        max(1, args.calls // 4),
    )
    report(times)
    print("ratios, round by round (median):")
    for numerator, denominator in RATIOS:
        print(f"  {numerator} / {denominator}: {paired_ratio(times[numerator], times[denominator]):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
