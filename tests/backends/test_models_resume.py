"""DANN, CDAN, MDD and the Student survive preemption on Keras' JAX and PyTorch backends as on
TensorFlow (tests/adaptation/test_preemption.py): a fit killed (`os._exit`) and
resumed in a new process ends with the uninterrupted fit's lambda at every step
and its final weights bit for bit. The batches come from `array_batches`
(no tf.data), the ramp's counter rides through JAX's compiled step
(`training.jax.StateCarrier`), and both follow the epoch Keras resumes at."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import preemption
from helpers.backends import BACKEND, needs_jax_or_torch

pytestmark = needs_jax_or_torch

SETUPS = {
    "dann-ema-lr-schedule": ["--method", "dann", "--ema", "--lr-schedule"],
    "cdan-e-part-optimizers": ["--method", "cdan-e", "--part-optimizers"],
    "mdd-warm-start": ["--method", "mdd-warm"],
    "student-ema": ["--method", "student", "--ema"],
}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted fit of a setup, once per setup."""
    runs: dict = {}

    def get(args: list[str]) -> dict:
        if tuple(args) not in runs:
            runs[tuple(args)] = preemption.uninterrupted(tmp_path_factory.mktemp("uninterrupted"), args)
        return runs[tuple(args)]

    return get


def assert_resumed_as_uninterrupted(resumed: dict, full: dict, first_epoch: int) -> None:
    expected = {key: value for key, value in full["lambdas"].items() if key[0] >= first_epoch}
    assert resumed["lambdas"] == expected, f"lambda after the resume on {BACKEND}"
    assert resumed["iterations"] == full["iterations"]
    differences = [float(np.max(np.abs(a - b))) for a, b in zip(resumed["weights"], full["weights"])]
    assert len(resumed["weights"]) == len(full["weights"])
    assert max(differences) == 0.0, f"largest weight difference from the uninterrupted fit on {BACKEND}: {differences}"


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_fit_killed_at_an_epoch_start_and_resumed_by_backup_and_restore_ends_bitwise_equal(setup, reference, tmp_path):
    args = SETUPS[setup]
    resumed, _ = preemption.kill_and_resume(tmp_path, args, kill="3")
    assert_resumed_as_uninterrupted(resumed, reference(args), first_epoch=3)


def test_fit_resumed_from_a_saved_keras_file_with_initial_epoch_ends_bitwise_equal(reference, tmp_path):
    args = SETUPS["dann-ema-lr-schedule"]
    resumed, _ = preemption.kill_and_resume(tmp_path, args, kill="4", saving=["--resume-by", "saved"])
    assert_resumed_as_uninterrupted(resumed, reference(args), first_epoch=4)
