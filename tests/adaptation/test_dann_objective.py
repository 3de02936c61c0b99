"""The objective `grad_reverse.DANN` trains: the paper's domain term (mean
over the source points + mean over the target points) by default, one mean
over the batch with `domain_loss_reduction="mean_over_batch"`, checked by
hand on batches of 2 source + 6 target points; and the paper's ramp making
an encoder domain-invariant on a problem where one input feature alone
tells the domains apart."""

import numpy as np
import pytest
import tensorflow as tf

from grad_reverse._keras import keras
from grad_reverse.adaptation import DANN
from helpers.models import RecordW, compile_reversal, dann, domains, reversal_dann

REDUCTIONS = ("sum_over_domains", "mean_over_batch")


def binary_cross_entropy(y, p):
    return -(y * np.log(p) + (1 - y) * np.log(1 - p))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_the_logged_domain_term_equals_a_hand_computation_on_unequal_halves(reduction):
    x_source, y_source, x_target = domains()
    model = dann()
    model.compile(keras.optimizers.SGD(0.0), "binary_crossentropy", domain_loss_reduction=reduction)  # weights stay
    history = model.fit(
        x_source,
        y_source,
        target=x_target,
        batch_size=8,
        source_fraction=0.25,
        steps_per_epoch=1,
        shuffle=False,
        verbose=0,
    )

    def domain(x):
        return np.asarray(model.domain_head(model.feature_extractor(x))).reshape(-1).astype("float64")

    source_losses = binary_cross_entropy(0.0, domain(x_source[:2]))  # the batch: 2 source points,
    target_losses = binary_cross_entropy(1.0, domain(x_target[:6]))  # 6 target points
    if reduction == "sum_over_domains":
        expected = source_losses.mean() + target_losses.mean()
    else:
        expected = np.concatenate([source_losses, target_losses]).mean()
    assert history.history["domain_loss"][0] == pytest.approx(expected, rel=1e-5)
    # The two differ by more than rounding on this batch: the check tells them apart.
    assert (
        abs(source_losses.mean() + target_losses.mean() - np.concatenate([source_losses, target_losses]).mean()) > 0.1
    )


@pytest.mark.parametrize(
    "reduction, expected_step", [("sum_over_domains", 1.0 + 3.0), ("mean_over_batch", (2 * 1.0 + 6 * 3.0) / 8)]
)
def test_the_trained_objective_weighs_the_domains_as_the_reduction_says(reduction, expected_step):
    """w (features = w * x) behind the reversal, domain loss = the head's output w * x,
    lambda 1, SGD(1): each step adds d(domain term)/dw. Source points x = 1 (2 of
    them), target points x = 3 (6): the paper's term mean(w) + mean(3w) gives 1 + 3;
    one mean over the 8 points gives (2 + 18) / 8."""
    model = reversal_dann(lambda_schedule="constant", lambda_max=1.0)
    compile_reversal(model, domain_loss_weight=1.0, domain_loss_reduction=reduction)
    record = RecordW()
    x_source, y_source = np.ones((2, 1), "float32"), np.zeros((2, 1), "float32")
    x_target = np.full((6, 1), 3.0, "float32")
    model.fit(
        x_source,
        y_source,
        target=x_target,
        batch_size=8,
        source_fraction=0.25,
        steps_per_epoch=2,
        verbose=0,
        callbacks=[record],
    )
    np.testing.assert_allclose(np.diff(record.w), [expected_step] * 2, rtol=1e-6)


def test_a_domain_loss_that_reduces_over_the_batch_is_refused():
    x_source, y_source, x_target = domains()
    model = dann()
    model.compile("sgd", "binary_crossentropy", domain_loss=lambda y_true, y_pred: tf.reduce_mean(y_pred))
    with pytest.raises(ValueError, match=r"domain loss must return one loss per point"):
        model.fit(x_source, y_source, target=x_target, verbose=0)


def test_an_unknown_reduction_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match="domain_loss_reduction must be one of .*sum_over_domains.*mean_over_batch"):
        dann().compile("sgd", "binary_crossentropy", domain_loss_reduction="sum")


# --- domain invariance ------------------------------------------------------------------


def one_domain_feature_problem(seed: int, n: int = 200) -> tuple:
    """Regression y = u1 - u2 on points (u1, u2, d): u uniform in [-1, 1]^2 in
    both domains, d = 0 on the source and 1 on the target. Only d tells the
    domains apart, and it does not enter y."""
    rng = np.random.default_rng(seed)

    def domain(d: float) -> tuple:
        u = rng.uniform(-1.0, 1.0, (n, 2)).astype("float32")
        return np.concatenate([u, np.full((n, 1), d, "float32")], axis=1), u[:, :1] - u[:, 1:]

    (x_source, y_source), (x_target, y_target) = domain(0.0), domain(1.0)
    return x_source, y_source, x_target, y_target


def invariance_run(seed: int, lambda_max: float) -> tuple:
    """(|w_d| / |w_u|, target mean absolute error) of a linear encoder (one
    feature, weights ones) + linear label head, DANN with the paper's ramp
    (gamma 10), SGD 0.05, 100 epochs of 32 + 32 points."""
    x_source, y_source, x_target, y_target = one_domain_feature_problem(seed)
    keras.utils.set_random_seed(seed)
    encoder = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")])
    label_head = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")])
    domain_head = keras.Sequential(
        [keras.Input((1,)), keras.layers.Dense(10, activation="relu"), keras.layers.Dense(1, activation="sigmoid")]
    )
    model = DANN(encoder, label_head, domain_head, lambda_max=lambda_max, gamma=10.0)
    model.compile(keras.optimizers.SGD(0.05), "mse")
    model.fit(x_source, y_source, target=x_target, batch_size=64, epochs=100, seed=seed, verbose=0)
    w = encoder.get_weights()[0][:, 0]
    error = np.mean(np.abs(np.asarray(model.predict(x_target, verbose=0)) - y_target))
    return abs(w[2]) / np.linalg.norm(w[:2]), float(error)


@pytest.mark.claims
def test_the_papers_ramp_makes_the_encoder_domain_invariant():
    """Over seeds 0 and 1, the means. Bounds: without adaptation (lambda 0)
    the source never moves w_d (d = 0 there), so the ratio stays near its
    start, 1 / sqrt(2) = 0.71 (0.70 measured), and every target prediction is
    off by about w_d: target error 0.99-1.0 (measured).
    Invariant here means the domain feature's weight below a fifth of the real
    features' (< 0.2: target predictions off by < ~0.3) and the target error
    below 0.3, under a third of the unadapted one. Measured with the paper's
    objective, seeds 0-2, on an Intel Xeon with AVX-512 and under
    ONEDNN_MAX_CPU_ISA=AVX2: ratio 0.02-0.05, target error 0.03-0.07. (With SGD
    the earlier mean_over_batch objective gets there too on this problem,
    ratio 0.01-0.05: the hand computations above tell the objectives apart,
    this test that the reversed domain gradient makes the encoder invariant.)"""
    seeds = (0, 1)
    ratio, error = np.mean([invariance_run(seed, lambda_max=1.0) for seed in seeds], axis=0)
    assert ratio < 0.2 and error < 0.3, (ratio, error)
    unadapted_ratio, unadapted_error = np.mean([invariance_run(seed, lambda_max=0.0) for seed in seeds], axis=0)
    assert unadapted_ratio > 0.6 and unadapted_error > 0.9, (unadapted_ratio, unadapted_error)
