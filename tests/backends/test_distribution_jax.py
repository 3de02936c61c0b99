"""`DANN`, `CDAN` (both maps, CDAN+E) and `MDD` under Keras' distribution API on
JAX (docs/distributed.md): `fit` under `DataParallel` over two forced host
devices, and over two processes on loopback (gloo CPU collectives), ends
within `BOUND` of one device's fit on the same global batches; each process
draws its own half of the global batch; two processes killed at an epoch's
start and restarted from `BackupAndRestore` end bit for bit as the
uninterrupted pair; and the mistakes are refused before any step.

The fits run in fresh processes (`helpers.distributed_fit`): the device count
is read when JAX starts, which this process has done."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from helpers import preemption
from helpers.backends import BACKEND
from helpers.distribute import free_loopback_ports, script_environment

pytestmark = pytest.mark.skipif(
    BACKEND != "jax",
    reason=f"Keras' distribution API runs on JAX (PyTorch has none; TensorFlow's is tf.distribute), and Keras "
    f"runs on {BACKEND} here; .ci/run's step 5b runs these in its JAX environment",
)

# Derived in docs/distributed.md: the order of float32 sums differs (two devices' partial sums
# and one all-reduce instead of one sum over the batch), about 1e-6 relative per step's gradient;
# Adam turns it into at most ~1e-8 per step of a weight at the rate 0.01, 60 steps ~1e-6; 1e-5
# leaves room for the adversarial game feeding earlier differences into later gradients.
BOUND = 1e-5
FIT = ["--epochs", "6", "--steps", "10"]  # 60 steps, batches of 8 source + 8 target points
SETUPS = {
    "dann-ema-lr-schedule-part-optimizers": ["--method", "dann", "--ema", "--lr-schedule", "--part-optimizers"],
    "cdan-e-multilinear-part-optimizers": ["--method", "cdan-e", "--part-optimizers"],
    "cdan-randomized-ema": ["--method", "cdan-random", "--ema"],
    "mdd-warm-start-lr-schedule": ["--method", "mdd-warm", "--lr-schedule"],
}
ACROSS_PROCESSES = ("dann-ema-lr-schedule-part-optimizers", "cdan-e-multilinear-part-optimizers")
TIMEOUT_S = 300


def launch(own: list[str], groups: list[list[str]]) -> subprocess.Popen:
    command = [sys.executable, "-m", "helpers.distributed_fit", *own]
    for group in groups:
        command += ["--", *group]
    env = script_environment(OMP_NUM_THREADS="1", KERAS_BACKEND="jax")
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(processes: list[subprocess.Popen], expect: int = 0) -> list[str]:
    """Waits for all `processes`; their stdouts. Each must exit with `expect`."""
    outputs = []
    try:
        for process in processes:
            stdout, stderr = process.communicate(timeout=TIMEOUT_S)
            assert process.returncode == expect, f"exit {process.returncode}, expected {expect}\n{stderr[-4000:]}"
            outputs.append(stdout)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    return outputs


def run_processes(count: int, groups_of, own: list[str] = (), expect: int = 0) -> list[str]:
    """`count` processes of one job on loopback; `groups_of(i)` the fits of process `i`."""
    (port,) = free_loopback_ports(1)
    common = ["--devices", "0", "--processes", str(count), "--port", str(port), *own]
    return finish([launch([*common, "--process-id", str(i)], groups_of(i)) for i in range(count)], expect)


def fit_args(setup: str, folder, name: str) -> list[str]:
    return [*SETUPS[setup], *FIT, "--backup", str(folder / f"{name}-backup"), "--out", str(folder / f"{name}.npz")]


def largest_difference(a: dict, b: dict) -> float:
    assert len(a["weights"]) == len(b["weights"])
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a["weights"], b["weights"]))


@pytest.fixture(scope="module")
def one_host(tmp_path_factory):
    """One process over two devices: every setup's fit without a distribution, then under
    `DataParallel`; `{setup: (one device's result, two devices')}`, and the one-device first batch."""
    folder = tmp_path_factory.mktemp("one-host")
    groups = []
    for setup in SETUPS:
        groups += [[*fit_args(setup, folder, f"{setup}-one"), "--no-distribution"], fit_args(setup, folder, setup)]
    finish([launch(["--devices", "2", "--record", str(folder / "first-batch.npz")], groups)])
    read = preemption.result
    results = {setup: (read(folder / f"{setup}-one.npz"), read(folder / f"{setup}.npz")) for setup in SETUPS}
    return results, dict(np.load(folder / "first-batch.npz"))


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    """Two processes of one device each, the `ACROSS_PROCESSES` setups uninterrupted (the first batch
    each drew recorded); `{setup: [process 0's result, process 1's]}`, `[first batches]`, the folder."""
    folder = tmp_path_factory.mktemp("two-processes")
    groups_of = lambda i: [fit_args(setup, folder, f"{setup}-{i}") for setup in ACROSS_PROCESSES]  # noqa: E731
    run_processes(2, groups_of, ["--record", str(folder / "first-batch-{i}.npz")])
    results = {s: [preemption.result(folder / f"{s}-{i}.npz") for i in range(2)] for s in ACROSS_PROCESSES}
    return results, [dict(np.load(folder / f"first-batch-{i}.npz")) for i in range(2)], folder


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_data_parallel_fit_on_two_devices_ends_within_the_float32_bound_of_one_device(setup, one_host):
    one, two = one_host[0][setup]
    assert two["iterations"] == one["iterations"] == 60
    assert two["lambdas"] == pytest.approx(one["lambdas"], abs=1e-7), "the lambda ramp under DataParallel"
    difference = largest_difference(one, two)
    print(f"{setup}: largest weight difference, two devices against one: {difference:.3g}")
    assert difference <= BOUND


@pytest.mark.parametrize("setup", ACROSS_PROCESSES)
def test_two_processes_end_within_the_bound_of_one_process_and_agree(setup, one_host, two_processes):
    one = one_host[0][setup][0]
    first, second = two_processes[0][setup]
    assert largest_difference(first, second) == 0.0, "the processes' replicated weights differ"
    difference = largest_difference(one, first)
    print(f"{setup}: largest weight difference, two processes against one device: {difference:.3g}")
    assert difference <= BOUND


def test_each_process_draws_its_own_half_of_the_one_process_batch(one_host, two_processes):
    whole, halves = one_host[1], two_processes[1]
    for key in ("x_source", "x_target", "y_source"):
        assert [len(h[key]) for h in halves] == [len(whole[key]) // 2] * 2, key
        np.testing.assert_array_equal(np.concatenate([h[key] for h in halves]), whole[key], err_msg=key)


def test_two_processes_killed_and_restarted_from_backup_and_restore_end_bitwise_equal(two_processes):
    setup = ACROSS_PROCESSES[0]
    full, folder = two_processes[0][setup][0], two_processes[2]
    groups_of = lambda i: [fit_args(setup, folder, f"restarted-{i}")]  # noqa: E731
    run_processes(2, lambda i: [[*groups_of(i)[0], "--kill", "3"]], expect=preemption.KILLED_EXIT_CODE)
    run_processes(2, groups_of)
    for i in range(2):
        resumed = preemption.result(folder / f"restarted-{i}.npz")
        assert resumed["iterations"] == full["iterations"]
        assert resumed["lambdas"] == {k: v for k, v in full["lambdas"].items() if k[0] >= 3}
        assert largest_difference(resumed, full) == 0.0


def refusals(stdout: str) -> dict:
    return {line.split("]")[0][len("REFUSED[") :]: line for line in stdout.splitlines() if "[" in line}


def test_an_odd_batch_and_a_distribution_set_after_the_model_are_refused_before_any_step(tmp_path):
    setup = fit_args("dann-ema-lr-schedule-part-optimizers", tmp_path, "refused")
    (stdout,) = finish([launch(["--devices", "2", "--mistakes", "odd-batch,late-distribution"], [setup])])
    lines = refusals(stdout)
    assert "after 0 steps" in lines["odd-batch"] and "must divide across the 2 devices" in lines["odd-batch"]
    assert "the source share is 9" in lines["odd-batch"]
    late = lines["late-distribution"]
    assert "after 0 steps" in late and "was made before the distribution was set" in late


def test_unequal_data_across_processes_is_refused_on_every_process_before_any_step(tmp_path):
    setup = fit_args("dann-ema-lr-schedule-part-optimizers", tmp_path, "refused")
    for stdout in run_processes(2, lambda i: [setup], ["--mistakes", "unequal-data"]):
        line = refusals(stdout)["unequal-data"]
        assert "after 0 steps" in line and "these differ between processes: x, y" in line


def test_a_model_argument_that_differs_between_processes_is_refused_on_every_process_before_any_step(tmp_path):
    setup = fit_args("dann-ema-lr-schedule-part-optimizers", tmp_path, "refused")
    for stdout in run_processes(2, lambda i: [setup], ["--mistakes", "unequal-lambda"]):
        line = refusals(stdout)["unequal-lambda"]
        assert "after 0 steps" in line, line
        assert "every process must make and compile the same model" in line
        assert "these differ between processes: the model's lambda_max." in line


def test_evaluate_and_predict_on_arrays_after_a_two_process_fit_say_what_works_and_calling_the_model_does(tmp_path):
    setup = fit_args("dann-ema-lr-schedule-part-optimizers", tmp_path, "after")
    outputs = run_processes(2, lambda i: [setup], ["--mistakes", "arrays-after-fit"])
    for stdout in outputs:
        lines = refusals(stdout)
        for call in ("evaluate", "predict"):
            assert f"DANN.{call} on 2 processes: Keras' distribution takes only a tf.data.Dataset" in lines[call]
            assert "keras.ops.convert_to_numpy(model(x[i : i + 1024], training=False))" in lines[call]
    sums = [next(line for line in stdout.splitlines() if line.startswith("CALLED[sum]")) for stdout in outputs]
    assert sums[0] == sums[1], sums  # every process computes every prediction, the same


class StandInDataset:
    """What the models know a tf.data dataset by (`element_spec`), without TensorFlow in this process."""

    element_spec = None


def test_a_tf_data_dataset_under_a_distribution_on_jax_is_refused_before_any_step(tmp_path):
    import jax
    import keras

    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=jax.devices()))
    try:
        model = preemption.build(preemption.parse(["--backup", str(tmp_path), "--out", "unused"]), keras)
        with pytest.raises(ValueError, match="got a tf.data dataset as x"):
            model.fit(StandInDataset(), target=np.zeros((4, 2), "float32"), batch_size=16)
        assert int(model.optimizer.iterations.numpy()) == 0
    finally:
        keras.distribution.set_distribution(None)
