"""The benchmark's cases: each builds the native op, the pure-Python version
and a floor that does no reversal on the same inputs, and times them
interleaved (see `measure`).

Lambda comes two ways, since they cost differently: a `tf.Variable` (what a
schedule such as `DANNLambdaSchedule` assigns between steps: the realistic
case, and the default) and a Python float. With a Variable, the eager floor
is `tf.identity` plus one read of the same Variable: no layer that takes a
scheduled lambda can do less.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import tensorflow as tf

import grad_reverse
from grad_reverse import reference
from grad_reverse.bench.limit import LIMIT_PREFIX, beyond_cache
from grad_reverse.bench.measure import Result, interleaved
from grad_reverse.bench.settings import LAMBDA_KINDS

LAMBDA_VALUE = 0.5
# From this many elements up, forward+backward in a graph is bound by memory
# bandwidth, so its GB/s is worth comparing with the machine's limit.
BANDWIDTH_BOUND_SIZE = 1 << 20

LambdaArg = float | tf.Variable
# The limit's ways (`limit.LimitWays.calls`) to time in a case's own rounds.
Beside = dict[str, Callable[[], object]] | None


def make_lambda(kind: str) -> LambdaArg:
    """A lambda of `kind`: a non-trainable tf.Variable (as a schedule holds it) or a float."""
    if kind == "variable":
        return tf.Variable(LAMBDA_VALUE, trainable=False, name="lambda")
    if kind == "float":
        return LAMBDA_VALUE
    raise ValueError(f"lambda kind must be one of {', '.join(LAMBDA_KINDS)}, got {kind!r}")


def _identity(x, lambda_):
    """The floor: what a layer that does nothing costs (no reversal)."""
    del lambda_
    return tf.identity(x)


def _identity_and_read(x, lambda_):
    """The eager floor with a Variable lambda: tf.identity plus one read of it
    (`value()`, the cheapest read Python offers)."""
    lambda_.value()
    return tf.identity(x)


LAYERS: dict[str, Callable] = {
    "native": grad_reverse.grad_reverse,
    "reference": reference.grad_reverse,
    "identity": _identity,
}
IMPLEMENTATIONS = tuple(LAYERS)


def _layers(lambda_: LambdaArg, eager: bool) -> dict[str, Callable]:
    layers = dict(LAYERS)
    if eager and isinstance(lambda_, tf.Variable):
        layers["identity+read"] = _identity_and_read
    return layers


def inputs(size: int, dtype: tf.DType) -> tuple[tf.Tensor, tf.Tensor]:
    """x and dy of `size` elements of `dtype`, the same at every call (fixed seeds)."""
    x = tf.cast(tf.random.normal([size], seed=1), dtype)
    dy = tf.cast(tf.random.normal([size], seed=2), dtype)
    return x, dy


def fwd_bwd(layer: Callable, x, dy, lambda_):
    """dx of `layer(x, lambda_)` for the output gradient `dy`."""
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, lambda_)
    return tape.gradient(y, x, output_gradients=dy)


def _bandwidth_bound(result: Result, beside: Beside) -> Result:
    """Marks the bytes the backward moves, and takes the limit's samples
    (timed among the case's calls) out of its times."""
    if result.size >= BANDWIDTH_BOUND_SIZE:
        result.bytes_moved = 2 * result.size * tf.as_dtype(result.dtype).size
    result.take_limit(LIMIT_PREFIX, applies=beyond_cache(result.bytes_moved // 2, 2))
    return result


def case_eager(size: int, dtype: tf.DType, rounds: int, lambda_kind: str = "variable", beside: Beside = None) -> Result:
    """Eager forward + backward: where dispatch cost dominates small tensors.
    `beside`: the limit's ways, timed in the same rounds."""
    x, dy = inputs(size, dtype)
    lambda_ = make_lambda(lambda_kind)
    calls = {
        name: (lambda layer=layer: fwd_bwd(layer, x, dy, lambda_))
        for name, layer in _layers(lambda_, eager=True).items()
    }
    per_round = max(1, min(50, (1 << 20) // max(size, 1)))
    times = _timed(calls, beside, rounds, per_round, fits_cache(size, dtype), calls["identity"])
    return _bandwidth_bound(Result("fwd+bwd", "eager", size, dtype.name, lambda_kind, times), beside)


def fits_cache(size: int, dtype: tf.DType) -> bool:
    """Whether x, dy and dx fit the cache together: then each sample gets a
    settling call (`interleaved`'s `settle`) and the limit's ways a recovery."""
    return not beyond_cache(size * dtype.size, 3)


# How long the floor runs, untimed, after the limit's ways in each round,
# and how many untimed calls precede each sample where the tensors fit the cache.
RECOVERY_SECONDS = 0.02
SETTLING_CALLS = 3


def recover(floor: Callable[[], object], seconds: float = RECOVERY_SECONDS) -> None:
    """Calls the floor, untimed, for `seconds`: what the limit's ways leave
    behind slows the next few milliseconds of TensorFlow calls, whichever
    they are, and would favour whichever implementation is timed second
    (docs/benchmark.md has the measurements behind RECOVERY_SECONDS). The
    call after the floor's can be slow too, so each sample also follows
    SETTLING_CALLS untimed calls of its own."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        floor()


def _timed(calls: dict, beside: Beside, rounds: int, per_round: int, in_cache: bool, floor: Callable) -> dict:
    """`interleaved` over the implementations and the limit's ways; where the
    tensors fit the cache, with a settling call per sample and, after the
    ways, the floor's recovery."""
    after_round = (lambda: recover(floor)) if beside and in_cache else None
    return interleaved(
        {**calls, **(beside or {})},
        rounds,
        per_round,
        settle=SETTLING_CALLS if in_cache else 0,
        after_round=after_round,
        rotate=len(calls),
    )


def fwd_bwd_function(layer: Callable, lambda_, jit: bool = False):
    """tf.function(x, dy) -> dx through `layer` (one trace per layer)."""

    def step(x, dy):
        return fwd_bwd(layer, x, dy, lambda_)

    return tf.function(step, jit_compile=jit)


def case_function(
    size: int, dtype: tf.DType, rounds: int, jit: bool = False, lambda_kind: str = "variable", beside: Beside = None
) -> Result:
    """tf.function forward + backward with dy passed in (so dx cannot reuse
    dy's buffer: the call includes allocating dx). A float lambda is a graph
    constant; a Variable is read inside the graph at every call."""
    x, dy = inputs(size, dtype)
    lambda_ = make_lambda(lambda_kind)
    calls = {}
    for name, layer in _layers(lambda_, eager=False).items():
        fn = fwd_bwd_function(layer, lambda_, jit)
        calls[name] = lambda fn=fn: fn(x, dy)
    per_round = max(1, min(50, (1 << 18) // max(size, 1)))
    mode = "xla" if jit else "tf.function"
    times = _timed(calls, beside, rounds, per_round, fits_cache(size, dtype), calls["identity"])
    return _bandwidth_bound(Result("fwd+bwd", mode, size, dtype.name, lambda_kind, times), beside)


def chain_function(layer: Callable, lambda_) -> Callable:
    """dy made inside the graph: h = 2x; y = layer(h); loss = sum(y*y); d loss/dx."""

    @tf.function
    def chain(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(2.0 * x, lambda_)
            loss = tf.reduce_sum(y * y)
        return tape.gradient(loss, x)

    return chain


def case_chain(size: int, dtype: tf.DType, rounds: int, lambda_kind: str = "variable") -> Result:
    """The chain graph (see `chain_function`): Grappler may fold a scalar
    multiplication around the pure-Python backward, not around a custom op."""
    x, _ = inputs(size, dtype)
    lambda_ = make_lambda(lambda_kind)
    calls = {}
    for name, layer in LAYERS.items():
        fn = chain_function(layer, lambda_)
        calls[name] = lambda fn=fn: fn(x)
    return Result("chain", "tf.function", size, dtype.name, lambda_kind, interleaved(calls, rounds))


def case_dann_step(batch: int, width: int, rounds: int, lambda_kind: str = "variable") -> Result:
    """A DANN-style training step, Dense(width)-ReLU-GRL-Dense(width)-ReLU-Dense(1)
    with SGD, the GRL being the package's Keras layer, the pure-Python version
    in a Lambda layer, or nothing ("no GRL")."""
    from grad_reverse._keras import keras

    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((batch, width)), tf.float32)
    y = tf.constant(rng.integers(0, 2, (batch, 1)), tf.float32)
    lambda_ = make_lambda(lambda_kind)
    grls = {
        "native": lambda: grad_reverse.GradReverse(lambda_),
        "reference": lambda: keras.layers.Lambda(lambda t: reference.grad_reverse(t, lambda_)),
        "no GRL": lambda: keras.layers.Identity(),
    }
    calls = {}
    for name, make_grl in grls.items():
        keras.utils.set_random_seed(0)
        model = keras.Sequential(
            [
                keras.Input((width,)),
                keras.layers.Dense(width, activation="relu"),
                make_grl(),
                keras.layers.Dense(width, activation="relu"),
                keras.layers.Dense(1),
            ]
        )
        optimizer = keras.optimizers.SGD(1e-4)
        loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)

        @tf.function
        def step(model=model, optimizer=optimizer, loss_fn=loss_fn):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        calls[name] = step
    return Result("dann step", "tf.function", batch, "float32", lambda_kind, interleaved(calls, rounds))
