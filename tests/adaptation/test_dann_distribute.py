"""`grad_reverse.DANN` under tf.distribute: Keras `fit` with MirroredStrategy
over two logical CPU devices, and the class's `train_step` driven by a
custom loop under MultiWorkerMirroredStrategy with two local workers (Keras
3's `fit` fails there even without our op: keras#20585), there for CDAN+E
and MDD too. Both compared with one device training on the same global batches.

The scenarios run in fresh processes (this file as a script), with the
helpers of tests/helpers/distribute.py; each prints one `RESULT <json>` line.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from grad_reverse._keras import keras
from helpers.distribute import (
    RESULT_MARKER,
    as_arrays,
    as_lists,
    assert_weights_close,
    max_abs_difference,
    run_scenario,
    run_workers,
)
from helpers.models import CDAN_MDD_STEPS, cdan_mdd, cdan_mdd_batches, cdan_mdd_one_device, dann, domains

SOURCE_PER_BATCH = 16  # global batch: 16 source + 16 target points
STEPS = 6
WORKER_METHODS = ("dann", "cdan", "mdd")  # cdan: CDAN+E (helpers.models.cdan_mdd)


def global_batches() -> tf.data.Dataset:
    """The same global batches everywhere: the first points of each domain, in order."""
    x_source, y_source, x_target = domains()
    k = SOURCE_PER_BATCH
    return tf.data.Dataset.from_tensors(((x_source[:k], x_target[:k]), y_source[:k])).repeat()


# The feature extractor at a fifth of the model's rate, the domain head with an optimizer of its own.
PART_OPTIMIZERS = {
    "feature_extractor": 0.2,
    "domain_head": {"class_name": "SGD", "config": {"learning_rate": 0.3, "momentum": 0.5}},
}


def compiled(lambda_schedule: str = "paper", part_optimizers=None) -> keras.Model:
    model = dann(lambda_max=2.0, lambda_schedule=lambda_schedule)
    model.compile(keras.optimizers.SGD(0.2), "binary_crossentropy", part_optimizers=part_optimizers)
    return model


def one_device(initial, lambda_schedule: str = "paper", part_optimizers=None) -> tuple:
    """STEPS steps on one device from `initial`: (weights, lambda logs)."""
    model = compiled(lambda_schedule, part_optimizers)
    model(np.zeros((1, 2), "float32"))
    model.set_weights(initial)
    history = model.fit(global_batches(), epochs=1, steps_per_epoch=STEPS, verbose=0)
    return model.get_weights(), history.history["lambda"]


# --------------------------------------------------------------- scenarios


def mirrored_scenario(part_optimizers=None) -> dict:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = compiled(part_optimizers=part_optimizers)
        model(np.zeros((1, 2), "float32"))
    initial = model.get_weights()
    history = model.fit(global_batches(), epochs=1, steps_per_epoch=STEPS, verbose=0)
    single, single_lambda = one_device(initial, part_optimizers=part_optimizers)
    # Another schedule (lambda 2 from the start), or without the parts' optimizers: elsewhere.
    other = one_device(initial, lambda_schedule="constant") if part_optimizers is None else one_device(initial)
    return {
        "replicas": strategy.num_replicas_in_sync,
        "initial": as_lists(initial),
        "mirrored": as_lists(model.get_weights()),
        "lambda": history.history["lambda"],
        "single": as_lists(single),
        "single_lambda": single_lambda,
        "other": as_lists(other[0]),
    }


def worker_scenario() -> dict:
    """One worker: each method's train_step in a custom loop, on its half of each global batch
    (DANN on this file's batches; CDAN+E and MDD on test_cdan_mdd_distribute's), in one
    process for all three: a worker's start (TensorFlow, the cluster) costs more than its steps."""
    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=60)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    result = {"task": json.loads(os.environ["TF_CONFIG"])["task"]["index"], "replicas": strategy.num_replicas_in_sync}
    for method in WORKER_METHODS:
        with strategy.scope():
            if method == "dann":
                model, batches, steps = compiled(), global_batches(), STEPS
                model(np.zeros((1, 2), "float32"))
            else:
                model, batches, steps = cdan_mdd(method), cdan_mdd_batches(), CDAN_MDD_STEPS
            model.build_optimizers()
        result[method] = custom_loop(strategy, model, batches, steps)
    return result


def parts_without_inputs(seed: int = 0) -> tuple:
    """helpers.models.parts' architecture written as most users write it: no keras.Input."""
    keras.utils.set_random_seed(seed)
    return (
        keras.Sequential([keras.layers.Dense(8, activation="tanh")]),
        keras.Sequential([keras.layers.Dense(1, activation="sigmoid")]),
        keras.Sequential([keras.layers.Dense(4, activation="relu"), keras.layers.Dense(1, activation="sigmoid")]),
    )


def worker_unbuilt_scenario() -> dict:
    """One worker running docs/dann.md's multi-worker recipe as written, with parts without
    keras.Input: the model's call and build_optimizers() must build the domain head before the
    optimizer, or the first step fails ("Unknown variable")."""
    from grad_reverse.adaptation import DANN

    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=60)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    result = {"task": json.loads(os.environ["TF_CONFIG"])["task"]["index"], "replicas": strategy.num_replicas_in_sync}
    with strategy.scope():
        model = DANN(*parts_without_inputs(), lambda_max=2.0)
        model.compile(keras.optimizers.SGD(0.2), "binary_crossentropy")
        model(domains()[0][:1])  # build
        model.build_optimizers()
    result["dann"] = custom_loop(strategy, model, global_batches(), STEPS)
    return result


def custom_loop(strategy, model: keras.Model, batches: tf.data.Dataset, steps: int) -> dict:
    """`steps` steps of `model.train_step` under `strategy.run`, each replica on its
    share of the (always same) global batch: initial and final weights, lambda per step."""
    (x_source, x_target), y_source = next(iter(batches))
    per_replica = int(x_source.shape[0]) // strategy.num_replicas_in_sync

    def shard(ctx):
        rows = slice(ctx.replica_id_in_sync_group * per_replica, (ctx.replica_id_in_sync_group + 1) * per_replica)
        return (x_source[rows], x_target[rows]), y_source[rows]

    model.set_schedule_steps(steps)
    initial = model.get_weights()
    batch = strategy.experimental_distribute_values_from_function(shard)

    @tf.function
    def train_step(batch):
        logs = strategy.run(model.train_step, args=(batch,))
        return strategy.experimental_local_results(logs["lambda"])[0]

    lambdas = [float(train_step(batch)) for _ in range(steps)]
    return {"initial": as_lists(initial), "weights": as_lists(model.get_weights()), "lambda": lambdas}


# ------------------------------------------------------------------- tests


@pytest.mark.parametrize("scenario", ["mirrored", "mirrored_parts"])
def test_mirrored_fit_equals_one_device_on_the_same_global_batches(scenario):
    """Also with per-part optimizers (`mirrored_parts`): each sums the replicas' gradients."""
    result = run_scenario([scenario], {}, script=__file__)
    assert result["replicas"] == 2
    initial, mirrored, single = (as_arrays(result[k]) for k in ("initial", "mirrored", "single"))
    assert max_abs_difference(single, initial) > 1e-2  # training moved the weights
    assert_weights_close(mirrored, single, "MirroredStrategy DANN fit vs one device")
    assert result["lambda"] == pytest.approx(result["single_lambda"], rel=1e-6)
    # Another lambda (or optimizer) ends elsewhere: the comparison above can tell.
    assert max_abs_difference(as_arrays(result["other"]), single) > 1e-3


@pytest.fixture(scope="module")
def worker_results() -> list:
    """The two workers' results, for every method (one run of the worker processes)."""
    results = run_workers(["worker"], 2, script=__file__)
    assert [r["task"] for r in results] == [0, 1] and all(r["replicas"] == 2 for r in results)
    return results


@pytest.mark.slow
@pytest.mark.parametrize("method", WORKER_METHODS)
def test_multi_worker_custom_loop_of_train_step_equals_one_process(worker_results, method):
    runs = [r[method] for r in worker_results]
    workers = [as_arrays(run["weights"]) for run in runs]
    for a, b in zip(*workers):
        np.testing.assert_array_equal(a, b)
    initial = as_arrays(runs[0]["initial"])
    if method == "dann":
        single, single_lambda = one_device(initial)
    else:
        single = cdan_mdd_one_device(method, initial)
    assert max_abs_difference(single, initial) > 1e-2
    assert_weights_close(workers[0], single, f"MultiWorkerMirroredStrategy {method} train_step loop vs one process")
    if method == "dann":
        # The step's lambda, per step, as in fit.
        expected = [2.0 * (2.0 / (1.0 + np.exp(-10.0 * s / (STEPS - 1))) - 1.0) for s in range(STEPS)]
        np.testing.assert_allclose(runs[0]["lambda"], expected, rtol=1e-5)
        assert single_lambda[-1] == pytest.approx(expected[-1], rel=1e-5)


@pytest.mark.slow
def test_the_multi_worker_recipe_with_parts_without_inputs_trains_every_part_as_one_process():
    results = run_workers(["worker_unbuilt"], 2, script=__file__)
    assert [r["task"] for r in results] == [0, 1] and all(r["replicas"] == 2 for r in results)
    workers = [as_arrays(r["dann"]["weights"]) for r in results]
    for a, b in zip(*workers):
        np.testing.assert_array_equal(a, b)
    initial = as_arrays(results[0]["dann"]["initial"])
    single, _ = one_device(initial)
    assert max_abs_difference(single[-4:], initial[-4:]) > 1e-3  # the domain head trains too
    assert_weights_close(workers[0], single, "multi-worker recipe, parts without keras.Input, vs one process")


SCENARIOS = {
    "mirrored": mirrored_scenario,
    "mirrored_parts": lambda: mirrored_scenario(PART_OPTIMIZERS),
    "worker": worker_scenario,
    "worker_unbuilt": worker_unbuilt_scenario,
}

if __name__ == "__main__":
    print(RESULT_MARKER + json.dumps(SCENARIOS[sys.argv[1]]()), flush=True)
