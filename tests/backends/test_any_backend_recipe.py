"""The recipe of docs/keras-backends.md (`grad_reverse.demo.any_backend`):
DANN with the layer and Keras' own `fit` on the moons. It runs on every
backend (the smoke test, TensorFlow included); on JAX and PyTorch it beats
the plain network on the target over seeds' means and still fits the source."""

import math

import numpy as np
import pytest

from grad_reverse.demo import any_backend
from helpers.backends import BACKEND, needs_jax_or_torch, needs_keras_3

pytestmark = needs_keras_3

CLAIM_SEEDS = (0, 1, 2)
# Measured over seeds 0-2 at 1000 steps on one x86 CPU (docs/keras-backends.md
# has seeds 0-4): the gap in means was 0.120 on JAX and 0.070 on PyTorch (one
# of PyTorch's three seeds has DANN 0.007 below the plain network); under half of the
# smaller is the claim.
MARGIN = 0.03


def test_the_ramp_runs_from_zero_to_lambda_max():
    assert any_backend.ramp(0.0) == 0.0
    assert any_backend.ramp(1.0) == pytest.approx(any_backend.LAMBDA_MAX * (2 / (1 + math.exp(-10)) - 1))
    assert any_backend.ramp(0.2) < any_backend.ramp(0.5) < any_backend.ramp(1.0)


def test_the_label_loss_sees_source_points_only_at_the_source_mean():
    x, y, weights, (x_target, _) = any_backend.training_data(0)
    n_target = len(x_target)
    assert np.all(weights["label"][-n_target:] == 0.0)
    assert np.all(weights["label"][:-n_target] == len(x) / (len(x) - n_target))
    assert np.all(y["domain"][-n_target:] == 1.0) and np.all(y["domain"][:-n_target] == 0.0)
    assert np.all(weights["domain"] == 1.0)


def test_a_short_run_trains_on_this_backend_with_the_schedule():
    model = any_backend.train(0, steps=20)
    lambda_ = [layer for layer in model.layers if layer.name == "grad_reverse"][0].lambda_
    assert float(np.asarray(lambda_.numpy() if hasattr(lambda_, "numpy") else lambda_)) == pytest.approx(
        any_backend.ramp(19 / 20), rel=1e-6
    )
    _, _, _, (x_target, y_target) = any_backend.training_data(0)
    assert 0.0 <= any_backend.accuracy(model, x_target, y_target) <= 1.0


@pytest.mark.claims
@needs_jax_or_torch
def test_dann_beats_source_only_on_the_target_over_seeds_means():
    results = [any_backend.run_seed(seed) for seed in CLAIM_SEEDS]
    table = any_backend.table(results)
    dann = np.mean([r.dann for r in results])
    plain = np.mean([r.plain for r in results])
    assert dann > plain + MARGIN, f"on {BACKEND}:\n{table}"
    assert min(r.source_dann for r in results) >= 0.95, f"DANN no longer fits the source on {BACKEND}:\n{table}"
