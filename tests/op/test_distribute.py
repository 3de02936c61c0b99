"""tf.distribute with the native op: MirroredStrategy over two logical CPU
devices (per-replica gradients, Keras `fit`), and MultiWorkerMirroredStrategy
with two worker processes on 127.0.0.1 (a custom training loop).

Each scenario runs in a fresh Python process, started from this file as a
script (`python test_distribute.py mirrored|worker`): logical devices and the
multi-worker runtime must be set up before TensorFlow initializes, and the
pytest process has already initialized it for the other test files. A scenario
prints one line, `RESULT <json>`, and the tests assert on that.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import grad_reverse
from helpers.distribute import (
    RESULT_MARKER,
    as_arrays,
    as_lists,
    assert_weights_close,
    max_abs_difference,
    run_scenario,
    run_workers,
)
from helpers.models import batch, dann_model

COLLECTIVE_TIMEOUT_S = 60  # a worker whose peer died fails instead of waiting forever
LAMBDA = 0.5
LOSSES = {"label": "binary_crossentropy", "domain": "binary_crossentropy"}


# ---------------------------------------------------------------- shared code


def per_example_loss(model: keras.Model, x, y) -> tf.Tensor:
    """Label loss + domain loss per example (shape [batch]); the domain head sits
    behind the GRL, so the feature extractor's gradient depends on the reversal."""
    out = model(x, training=True)
    return keras.losses.binary_crossentropy(y["label"], out["label"]) + keras.losses.binary_crossentropy(
        y["domain"], out["domain"]
    )


def sgd_steps(model: keras.Model, x, y, steps: int) -> list[np.ndarray]:
    """The single-process reference: `steps` SGD steps on the whole global batch."""
    optimizer = keras.optimizers.SGD(0.1)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(per_example_loss(model, x, y))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    for _ in range(steps):
        step()
    return model.get_weights()


# --------------------------------------------------- scenario: MirroredStrategy

MIRRORED_LAMBDAS = (0.75, -2.5)  # a mirrored Variable, assigned between steps
FIT_SAMPLES, FIT_BATCH, FIT_EPOCHS = 256, 64, 2


def mirrored_scenario() -> dict:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    result = {"replicas": strategy.num_replicas_in_sync}

    # Per-replica gradients: each replica reverses its own dy with the
    # replica-local copy of a mirrored lambda variable.
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal(6).astype(np.float32) for _ in range(2)]
    dys = [rng.standard_normal(6).astype(np.float32) * 10 for _ in range(2)]
    with strategy.scope():
        lambda_ = tf.Variable(MIRRORED_LAMBDAS[0], trainable=False)
    x = strategy.experimental_distribute_values_from_function(lambda ctx: tf.constant(xs[ctx.replica_id_in_sync_group]))
    dy = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.constant(dys[ctx.replica_id_in_sync_group])
    )

    @tf.function
    def reversed_gradients(x, dy):
        def replica_fn(x, dy):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = grad_reverse.grad_reverse(x, lambda_)
            return y, tape.gradient(y, x, output_gradients=dy)

        return strategy.run(replica_fn, args=(x, dy))

    result["per_replica"] = []
    for value in MIRRORED_LAMBDAS:
        lambda_.assign(value)
        y, dx = reversed_gradients(x, dy)
        result["per_replica"].append(
            {
                "lambda": value,
                "x": as_lists(xs),
                "dy": as_lists(dys),
                "y": as_lists(t.numpy() for t in strategy.experimental_local_results(y)),
                "dx": as_lists(t.numpy() for t in strategy.experimental_local_results(dx)),
            }
        )
    result["traces"] = reversed_gradients.experimental_get_tracing_count()
    # Where the backward ran: the placement of each GradReverseGrad node in
    # the traced graph (the function returns its outputs on one device).
    graph = reversed_gradients.get_concrete_function(x, dy).graph
    result["backward_devices"] = sorted(op.device for op in graph.get_operations() if op.type == "GradReverseGrad")

    # Keras fit: distributed vs one device on the same global batches, and,
    # to show the comparison can tell, one device without the reversal.
    x_fit, y_fit = batch(FIT_SAMPLES, seed=1)
    initial = dann_model(grad_reverse.GradReverse(LAMBDA)).get_weights()

    def fitted(grl_factory, strategy=None):
        with strategy.scope() if strategy else contextlib.nullcontext():
            model = dann_model(grl_factory())
            model.set_weights(initial)
            model.compile(optimizer=keras.optimizers.SGD(0.1), loss=LOSSES)
        history = model.fit(x_fit, y_fit, batch_size=FIT_BATCH, epochs=FIT_EPOCHS, shuffle=False, verbose=0)
        return model.get_weights(), history.history["loss"]

    for key, factory, on in (
        ("mirrored", lambda: grad_reverse.GradReverse(LAMBDA), strategy),
        ("single", lambda: grad_reverse.GradReverse(LAMBDA), None),
        ("no_reversal", keras.layers.Identity, None),
    ):
        weights, loss = fitted(factory, on)
        result[key] = {"weights": as_lists(weights), "loss": loss}
    result["initial"] = as_lists(initial)
    return result


# ------------------------------------- scenario: MultiWorkerMirroredStrategy

MW_WORKERS, MW_GLOBAL_BATCH, MW_STEPS = 2, 64, 5


def worker_scenario() -> dict:
    """One worker of a MultiWorkerMirroredStrategy cluster (TF_CONFIG): a
    custom loop of SGD steps, each worker on its half of the global batch."""
    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=COLLECTIVE_TIMEOUT_S)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    task = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    x, y = batch(MW_GLOBAL_BATCH, seed=2)
    per_replica = MW_GLOBAL_BATCH // strategy.num_replicas_in_sync

    def shard(ctx):
        rows = slice(ctx.replica_id_in_sync_group * per_replica, (ctx.replica_id_in_sync_group + 1) * per_replica)
        return tf.constant(x[rows]), {k: tf.constant(v[rows]) for k, v in y.items()}

    with strategy.scope():
        model = dann_model(grad_reverse.GradReverse(LAMBDA))
        optimizer = keras.optimizers.SGD(0.1)
        optimizer.build(model.trainable_variables)
    initial = model.get_weights()
    inputs = strategy.experimental_distribute_values_from_function(shard)

    @tf.function
    def train_step(inputs):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                # The sum over this replica's rows over the *global* batch
                # size: the optimizer sums gradients over replicas, giving the
                # gradient of the global mean.
                loss = tf.reduce_sum(per_example_loss(model, x, y)) / MW_GLOBAL_BATCH
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(replica_fn, args=inputs), axis=None)

    losses = [float(train_step(inputs)) for _ in range(MW_STEPS)]
    return {
        "task": task,
        "replicas": strategy.num_replicas_in_sync,
        "losses": losses,
        "initial": as_lists(initial),
        "weights": as_lists(model.get_weights()),
    }


# ---------------------------------------------------------------------- tests


@pytest.fixture(scope="module")
def mirrored():
    return run_scenario(["mirrored"], {}, script=__file__)


def test_mirrored_per_replica_gradients_are_minus_lambda_times_that_replicas_dy(mirrored):
    assert mirrored["replicas"] == 2
    devices = [d.upper() for d in mirrored["backward_devices"]]
    assert len(devices) == 2 and devices[0].endswith("CPU:0") and devices[1].endswith("CPU:1"), devices
    for run in mirrored["per_replica"]:
        scale = -np.float32(run["lambda"])
        for x, dy, y, dx in zip(*(as_arrays(run[k]) for k in ("x", "dy", "y", "dx"))):
            np.testing.assert_array_equal(y, x)
            # float32 dy times a float32 lambda: one rounding, so exact equality.
            np.testing.assert_array_equal(dx, dy * scale)
    # The mirrored lambda variable was read at run time, not baked in.
    assert mirrored["traces"] == 1


def test_mirrored_keras_fit_equals_a_single_device_run_on_the_same_global_batches(mirrored):
    distributed = as_arrays(mirrored["mirrored"]["weights"])
    single = as_arrays(mirrored["single"]["weights"])
    no_reversal = as_arrays(mirrored["no_reversal"]["weights"])
    initial = as_arrays(mirrored["initial"])
    assert max_abs_difference(single, initial) > 1e-2  # training moved the weights
    assert_weights_close(distributed, single, "MirroredStrategy fit vs one device")
    # Without the reversal the feature weights end far from these: the
    # comparison above would catch a replica that dropped the GRL.
    assert max_abs_difference(no_reversal[:2], single[:2]) > 1e-3
    np.testing.assert_allclose(mirrored["mirrored"]["loss"], mirrored["single"]["loss"], rtol=1e-5)


@pytest.mark.slow
def test_multi_worker_custom_loop_workers_agree_and_equal_a_single_process_run():
    # Loopback addresses only. (TensorFlow's gRPC server itself listens on
    # 0.0.0.0:<port>, hard-coded in its grpc_server_lib; the workers reach
    # each other through 127.0.0.1.)
    results = run_workers(["worker"], MW_WORKERS, script=__file__)

    assert [r["task"] for r in results] == [0, 1] and all(r["replicas"] == 2 for r in results)
    workers = [as_arrays(r["weights"]) for r in results]
    for a, b in zip(*workers):  # one all-reduced update applied on both: identical
        np.testing.assert_array_equal(a, b)

    # The single-process run: same initial weights, the whole global batch.
    initial = as_arrays(results[0]["initial"])
    x, y = batch(MW_GLOBAL_BATCH, seed=2)
    x, y = tf.constant(x), {k: tf.constant(v) for k, v in y.items()}
    runs = {}
    for key, grl in (("reversed", grad_reverse.GradReverse(LAMBDA)), ("plain", keras.layers.Identity())):
        model = dann_model(grl)
        model.set_weights(initial)
        runs[key] = sgd_steps(model, x, y, MW_STEPS)
    assert max_abs_difference(runs["reversed"], initial) > 1e-2
    assert_weights_close(workers[0], runs["reversed"], "MultiWorkerMirroredStrategy vs one process")
    assert max_abs_difference(runs["plain"][:2], runs["reversed"][:2]) > 1e-3


SCENARIOS = {"mirrored": mirrored_scenario, "worker": worker_scenario}

if __name__ == "__main__":
    print(RESULT_MARKER + json.dumps(SCENARIOS[sys.argv[1]]()), flush=True)
