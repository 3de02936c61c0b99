"""Bars a broken fit cannot pass, on JAX and PyTorch: the fit adapts (lambda
reaches the features through the adversary) and each step applies its own
batch's gradient, nothing left from the step before.

A fit whose adversary never sees lambda trains the features exactly as the
plain network does (the reversal passes `-0 * dy`), so comparing with the plain
network trained the same way from the same seed catches it, where a bar on
accuracy alone did not (the README's block gives 0.86 on the target then, over
a bar of 0.8). Gradients that accumulate across PyTorch steps (no `zero_grad`)
still train and still pass every bar on accuracy: two steps of one fit must
equal one step, then a step of a fresh model from those weights.
scripts/mutation_lib/mutants_training.py holds a mutant of each kind."""

from __future__ import annotations

import keras
import numpy as np
import pytest

import grad_reverse
from grad_reverse.demo.data import make_domains
from helpers.backends import needs_jax_or_torch

pytestmark = needs_jax_or_torch


def dense(inputs: int, units: int, activation: str = "sigmoid") -> keras.Sequential:
    return keras.Sequential([keras.Input((inputs,)), keras.layers.Dense(units, activation=activation)])


MAKERS = {
    "dann": lambda **kw: grad_reverse.DANN(dense(2, 8), dense(8, 1), dense(8, 1), lambda_max=2.0, **kw),
    "cdan": lambda **kw: grad_reverse.CDAN(dense(2, 8), dense(8, 2, "softmax"), dense(16, 1), randomized=False, **kw),
    "mdd": lambda **kw: grad_reverse.MDD(dense(2, 8), dense(8, 2, "softmax"), lambda_max=2.0, **kw),
}
LOSSES = {
    "dann": "binary_crossentropy",
    "cdan": "sparse_categorical_crossentropy",
    "mdd": "sparse_categorical_crossentropy",
}


def fitted(method: str, steps: int, *, adversary_weight: float = 1.0, weights: list | None = None, **kw):
    """`method`'s model from seed 0 after `steps` full-batch SGD steps, in order (no shuffle):
    each step sees the same batch, and SGD's update is the gradient times the rate."""
    keras.utils.set_random_seed(0)
    moons = make_domains(seed=0, n_per_class=40)
    # The adversary's weight: MDD's trade_off (its constructor's), DANN's and CDAN's domain_loss_weight.
    if method == "mdd":
        model, weighted = MAKERS[method](trade_off=adversary_weight, **kw), {}
    else:
        model, weighted = MAKERS[method](**kw), {"domain_loss_weight": adversary_weight}
    if weights is not None:
        model.set_weights(weights)
    model.compile(keras.optimizers.SGD(0.5), LOSSES[method], **weighted)
    batch = 2 * len(moons.x_source)
    model.fit(
        moons.x_source,
        moons.y_source,
        target=moons.x_target,
        batch_size=batch,
        steps_per_epoch=steps,
        shuffle=False,
        verbose=0,
    )
    return model


@pytest.mark.parametrize("method", sorted(MAKERS))
def test_the_adversary_moves_the_features_away_from_the_plain_networks(method):
    """The same model, seed and batches with the adversary's term weighted 0 is the plain
    network; with it, the features must move elsewhere (lambda reached them, reversed)."""
    adapted = fitted(method, 5).feature_extractor.get_weights()
    plain = fitted(method, 5, adversary_weight=0.0).feature_extractor.get_weights()
    gap = max(float(np.max(np.abs(a - p))) for a, p in zip(adapted, plain))
    # Measured: 1e-3 to 1e-2 on JAX and PyTorch; a fit whose adversary sees no lambda gives 0.
    assert gap > 1e-5, gap


@pytest.mark.parametrize("method", sorted(MAKERS))
def test_each_step_applies_its_own_batchs_gradient_and_nothing_from_the_step_before(method):
    """Two steps of one fit equal one step, then one step of a fresh model from those weights
    (SGD keeps no state; lambda constant, so the step's index changes nothing)."""
    two = fitted(method, 2, lambda_schedule="constant").get_weights()
    one = fitted(method, 1, lambda_schedule="constant").get_weights()
    then = fitted(method, 1, lambda_schedule="constant", weights=one).get_weights()
    moved = max(float(np.max(np.abs(a - b))) for a, b in zip(two, one))
    assert moved > 1e-4, "the second step moved nothing: the comparison below would prove nothing"
    for a, b in zip(two, then):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
