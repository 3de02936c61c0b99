"""The tensor operations the methods' objectives are written in, on every backend.

`ops` is `keras.ops` (Keras 3, on TensorFlow, JAX or PyTorch): DANN's,
CDAN's and MDD's objectives are written once in its names. Keras 2 (TensorFlow
2.15, legacy tf.keras) has no `keras.ops`; there `ops` is `_KerasTwoOps`, the
same names over TensorFlow's functions, for the names the objectives use.

Beside it, the three things that differ by backend below the objective, each
in one place:

* `reverse(x, lambda_)`: the gradient reversal; on TensorFlow the native op
  (`grad_reverse.ops.grad_reverse`), on JAX and PyTorch the backend's own
  custom gradient (`grad_reverse.backend_layer`);
* `replicas_in_sync()`, `mean_over_replicas(value)`: tf.distribute's replicas
  (1 and `value` itself on the other backends, which Keras does not distribute
  that way);
* `strategy_scope(model)`, `in_replica_context()`: where variables are made.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

from grad_reverse._keras import TENSORFLOW, keras_backend

BACKEND = keras_backend()
ON_TENSORFLOW = BACKEND == TENSORFLOW


class _KerasTwoOps:
    """`keras.ops`' names used by the objectives, over TensorFlow (Keras 2 has no `keras.ops`)."""

    def __getattr__(self, name: str) -> Any:
        import tensorflow as tf

        names = {
            "mean": tf.reduce_mean,
            "sum": tf.reduce_sum,
            "max": tf.reduce_max,
            "log": tf.math.log,
            "exp": tf.exp,
            "abs": tf.abs,
            "concatenate": lambda xs, axis=0: tf.concat(xs, axis),
            "reshape": tf.reshape,
            "cast": tf.cast,
            "stop_gradient": tf.stop_gradient,
            "argmax": lambda x, axis=-1: tf.argmax(x, axis=axis),
            "take_along_axis": lambda x, indices, axis: tf.gather(x, indices, axis=axis, batch_dims=axis),
            "minimum": tf.minimum,
            "maximum": tf.maximum,
            "clip": tf.clip_by_value,
            "matmul": tf.matmul,
            "log_softmax": lambda x, axis=-1: tf.nn.log_softmax(x, axis=axis),
            "log_sigmoid": tf.math.log_sigmoid,
            "sigmoid": tf.sigmoid,
            "softmax": lambda x, axis=-1: tf.nn.softmax(x, axis=axis),
            "equal": tf.equal,
            "shape": lambda x: tuple(d if d is not None else tf.shape(x)[i] for i, d in enumerate(x.shape)),
            "zeros": lambda shape, dtype="float32": tf.zeros(shape, dtype),
            "ones": lambda shape, dtype="float32": tf.ones(shape, dtype),
            "expand_dims": tf.expand_dims,
            "convert_to_tensor": lambda x, dtype=None: tf.convert_to_tensor(x, dtype=dtype),
            "power": tf.pow,
        }
        if name not in names:
            raise AttributeError(f"the Keras 2 stand-in for keras.ops has no {name!r}")
        return names[name]


@functools.cache
def _ops() -> Any:
    from grad_reverse._keras import KERAS_3, keras

    return keras.ops if KERAS_3 else _KerasTwoOps()


def __getattr__(name: str) -> Any:
    if name == "ops":
        return _ops()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _reverse() -> Any:
    if ON_TENSORFLOW:
        from grad_reverse.ops import grad_reverse

        return grad_reverse
    from grad_reverse.backend_layer import reverse_function

    return reverse_function(BACKEND)


def reverse(x: Any, lambda_: Any) -> Any:
    """`x` forward; the gradient times `-lambda_` backward (the backend's own reversal)."""
    return _reverse()(x, lambda_)


def replicas_in_sync() -> int:
    """Replicas whose gradients the optimizer sums (1 outside tf.distribute, and off TensorFlow)."""
    if not ON_TENSORFLOW:
        return 1
    import tensorflow as tf

    return tf.distribute.get_strategy().num_replicas_in_sync


def mean_over_replicas(value: Any) -> Any:
    """`value` averaged over the replicas in sync (itself outside tf.distribute and off TensorFlow)."""
    if not ON_TENSORFLOW:
        return value
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce("mean", value)


def in_replica_context() -> bool:
    """Inside `strategy.run` (TensorFlow): variables are then made by the strategy, not here."""
    if not ON_TENSORFLOW:
        return False
    import tensorflow as tf

    return tf.distribute.has_strategy() and not tf.distribute.in_cross_replica_context()


def strategy_scope(model: Any) -> Any:
    """The model's tf.distribute scope (TensorFlow), or no scope."""
    strategy = getattr(model, "distribute_strategy", None) if ON_TENSORFLOW else None
    return strategy.scope() if strategy is not None else contextlib.nullcontext()


def rank(shape: Any) -> int | None:
    """The number of dimensions of `shape` (a tuple or a TensorShape), None when unknown."""
    try:
        return len(shape)
    except (TypeError, ValueError):
        return None
