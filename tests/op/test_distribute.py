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
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import keras
import tensorflow as tf

import grad_reverse
from test_layer import batch, dann_model

RESULT_MARKER = "RESULT "
SCENARIO_TIMEOUT_S = 180  # whole-process bound; a healthy run takes a fraction of it
COLLECTIVE_TIMEOUT_S = 60  # a worker whose peer died fails instead of waiting forever
LAMBDA = 0.5
LOSSES = {"label": "binary_crossentropy", "domain": "binary_crossentropy"}


# ---------------------------------------------------------------- shared code


def per_example_loss(model: keras.Model, x, y) -> tf.Tensor:
    """Label loss + domain loss per example (shape [batch]); the domain head sits
    behind the GRL, so the feature extractor's gradient depends on the reversal."""
    out = model(x, training=True)
    return (keras.losses.binary_crossentropy(y["label"], out["label"])
            + keras.losses.binary_crossentropy(y["domain"], out["domain"]))


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


def as_lists(arrays) -> list:
    return [np.asarray(a).tolist() for a in arrays]  # float32 -> Python float is exact


def as_arrays(lists) -> list[np.ndarray]:
    return [np.asarray(a, np.float32) for a in lists]


def run_scenario(args: list[str], env_update: dict[str, str], timeout: float = SCENARIO_TIMEOUT_S,
                 script: str = __file__) -> dict:
    """Runs `script` (this file by default) as a script and returns its RESULT json."""
    process = start_scenario(args, env_update, script)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(process)
        stderr = process.communicate(timeout=30)[1]
        pytest.fail(f"scenario {args} did not finish within {timeout}s\nstderr tail:\n{stderr[-4000:]}")
    finally:
        stop(process)
    return parse_result(process, stdout, stderr)


def start_scenario(args: list[str], env_update: dict[str, str], script: str = __file__) -> subprocess.Popen:
    # The environment passes through (PYTHONPATH when testing a source tree,
    # nothing when testing an installed package); the script's own directory
    # puts test_layer/conftest on sys.path. CPU only: the scenarios are about
    # logical CPU devices and loopback workers, not whatever GPU a host has.
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="-1", TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_CONFIG", None)  # only a worker gets one, its own
    env.update(env_update)
    return subprocess.Popen([sys.executable, str(Path(script).resolve()), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
        process.wait(timeout=30)


def parse_result(process: subprocess.Popen, stdout: str, stderr: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith(RESULT_MARKER)]
    assert process.returncode == 0 and lines, (
        f"scenario {process.args[2:]} exited with {process.returncode}\n"
        f"stdout tail:\n{stdout[-2000:]}\nstderr tail:\n{stderr[-4000:]}"
    )
    return json.loads(lines[-1][len(RESULT_MARKER):])


def free_loopback_ports(count: int) -> list[int]:
    """Ports the kernel reports free on 127.0.0.1 now (held together so they differ)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def assert_weights_close(actual, expected, what: str, rtol=1e-5, atol=1e-6) -> None:
    assert len(actual) == len(expected), what
    for i, (a, e) in enumerate(zip(actual, expected)):
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, err_msg=f"{what}: weight {i}")


def max_abs_difference(a, b) -> float:
    return max(float(np.max(np.abs(x - y))) if x.size else 0.0 for x, y in zip(a, b))


def run_workers(args: list[str], workers: int, script: str = __file__) -> list[dict]:
    """Runs `script args` as `workers` MultiWorkerMirroredStrategy workers on
    127.0.0.1 ports (one TF_CONFIG each); returns their RESULT jsons in task order."""
    ports = free_loopback_ports(workers)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    processes = []
    outputs = {}
    try:
        for index in range(workers):
            tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
            processes.append(start_scenario(args, {"TF_CONFIG": tf_config}, script))
        deadline = time.monotonic() + SCENARIO_TIMEOUT_S
        for index, process in enumerate(processes):
            try:
                outputs[index] = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for p in processes:
                    stop(p)
                # After a kill, communicate() returns everything each one wrote.
                stderr = "\n".join(
                    f"--- worker {i}:\n{(outputs[i] if i in outputs else p.communicate(timeout=30))[1][-3000:]}"
                    for i, p in enumerate(processes))
                pytest.fail(f"workers did not finish within {SCENARIO_TIMEOUT_S}s on {cluster}\n{stderr}")
    finally:
        for process in processes:
            stop(process)
    return [parse_result(processes[i], *outputs[i]) for i in range(workers)]


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
    dy = strategy.experimental_distribute_values_from_function(lambda ctx: tf.constant(dys[ctx.replica_id_in_sync_group]))

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
        result["per_replica"].append({
            "lambda": value,
            "x": as_lists(xs), "dy": as_lists(dys),
            "y": as_lists(t.numpy() for t in strategy.experimental_local_results(y)),
            "dx": as_lists(t.numpy() for t in strategy.experimental_local_results(dx)),
        })
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

    for key, factory, on in (("mirrored", lambda: grad_reverse.GradReverse(LAMBDA), strategy),
                             ("single", lambda: grad_reverse.GradReverse(LAMBDA), None),
                             ("no_reversal", keras.layers.Identity, None)):
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
    return {"task": task, "replicas": strategy.num_replicas_in_sync, "losses": losses,
            "initial": as_lists(initial), "weights": as_lists(model.get_weights())}


# ---------------------------------------------------------------------- tests


@pytest.fixture(scope="module")
def mirrored():
    return run_scenario(["mirrored"], {})


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
    results = run_workers(["worker"], MW_WORKERS)

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
