"""`python -m grad_reverse example`: a short, self-checking example: forward
is the identity, backward is -lambda*dy. TensorFlow is imported when it runs,
so `example --help` is quick."""

from __future__ import annotations

import argparse
from typing import Any


def run() -> None:
    """Prints x, y = grad_reverse(x, 0.5) and the gradient of sum(3 * y); checks both."""
    import tensorflow as tf

    import grad_reverse

    x = tf.constant([[1.0, -2.0, 3.0]])
    lambda_ = tf.Variable(0.5)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = grad_reverse.grad_reverse(x, lambda_)
        loss = tf.reduce_sum(3.0 * y)
    dx = tape.gradient(loss, x)
    print("x            ", x.numpy().tolist())
    print("forward y    ", y.numpy().tolist(), "(identity)")
    print("dloss/dy     ", [[3.0, 3.0, 3.0]])
    print("dloss/dx     ", dx.numpy().tolist(), f"(= -{lambda_.numpy()} * dloss/dy)")
    tf.debugging.assert_equal(y, x)
    tf.debugging.assert_equal(dx, tf.fill(x.shape, -1.5))


def _run(args: argparse.Namespace) -> int:
    run()
    return 0


def add_cli(subparsers: Any) -> None:
    """Registers the `example` subcommand on the `python -m grad_reverse` parser."""
    parser = subparsers.add_parser(
        "example",
        help="a short forward/backward example",
        description="Runs grad_reverse on a small tensor and prints the forward (the identity) "
        "and the gradient (-lambda times the incoming one), checking both.",
    )
    parser.set_defaults(run=_run)
