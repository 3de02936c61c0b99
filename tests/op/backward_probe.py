"""Run by tests/op/test_backward_modes_and_stock.py in a fresh process, with GRAD_REVERSE_BACKWARD
set as the test chooses (the package reads it once, at import): prints, as
JSON, the backward chosen, the op types of the gradient graph per dtype, and
first- and second-order gradients (eager, tf.function and XLA) and an
IndexedSlices gradient, for the test to compare between the modes.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

import grad_reverse
from grad_reverse import ops

DTYPES = [tf.float16, tf.bfloat16, tf.float32, tf.float64]
LAMBDA = 0.3


def gradient_op_types(dtype) -> list[str]:
    """Op types the gradient adds to a traced function: those in the
    gradient tape's name scope."""

    @tf.function
    def backward(x, dy, lambda_):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = grad_reverse.grad_reverse(x, lambda_)
        return tape.gradient(y, x, output_gradients=dy)

    spec = tf.TensorSpec([None], dtype)
    graph = backward.get_concrete_function(spec, spec, tf.TensorSpec([], tf.float32)).graph
    return sorted({op.type for op in graph.get_operations() if op.name.startswith("gradient_tape/")})


def second_order(x: tf.Tensor, lambda_: tf.Variable):
    """g = d/dx sum(grad_reverse(x)^2) = -2 lambda x, and h = d/dx sum(g) =
    2 lambda^2 (its path back to x crosses the backward, then the layer
    again); and the gradient of sum(g) with respect to lambda, which has
    none (None)."""
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = grad_reverse.grad_reverse(x, lambda_)
            loss = tf.reduce_sum(y * y)
        g = inner.gradient(loss, x)
        total = tf.reduce_sum(g)
    h = outer.gradient(total, x)
    to_lambda = outer.gradient(total, lambda_)
    return g, h, to_lambda


def indexed_slices_gradient():
    table = tf.Variable(tf.reshape(tf.range(12, dtype=tf.float32), [6, 2]))
    with tf.GradientTape() as tape:
        rows = grad_reverse.grad_reverse(table, 0.5)
        loss = tf.reduce_sum(tf.gather(rows, [1, 4]) * tf.constant([[1.0, 2.0]]))
    grad = tape.gradient(loss, table)
    return type(grad).__name__, tf.convert_to_tensor(grad).numpy().tolist()


def as_list(t):
    return None if t is None else t.numpy().tolist()


def main() -> None:
    x = tf.constant(np.linspace(-2.0, 3.0, 7), tf.float32)
    lambda_ = tf.Variable(LAMBDA)
    runs = {
        "eager": second_order,
        "function": tf.function(second_order),
        "xla": tf.function(second_order, jit_compile=True),
    }
    second = {}
    for name, run in runs.items():
        g, h, to_lambda = run(x, lambda_)
        second[name] = {"g": as_list(g), "h": as_list(h), "to_lambda": as_list(to_lambda)}
    kind, dense = indexed_slices_gradient()
    print(
        json.dumps(
            {
                "backward": {"mode": ops.BACKWARD.mode, "kernel": ops.BACKWARD.kernel, "reason": ops.BACKWARD.reason},
                "op_types": {d.name: gradient_op_types(d) for d in DTYPES},
                "x": x.numpy().tolist(),
                "second_order": second,
                "indexed_slices": {"type": kind, "dense": dense},
            }
        )
    )


if __name__ == "__main__":
    sys.exit(main())
