"""EnsV (a pool validator), MixVal (mixed target points as probes) and BNM
(the batch nuclear norm): each against values worked out by hand on tiny
inputs written out here; MixVal on a model whose decision a hand can follow.
Peers: MixVal against skada's `MixValScorer` in test_validator_peers.py."""

import math

import numpy as np
import pytest

from grad_reverse._keras import keras
from grad_reverse.adaptation import (
    DANN,
    POOL_VALIDATORS,
    VALIDATORS,
    BatchNuclearNorm,
    EnsembleValidation,
    MixVal,
    ValidatorCallback,
)
from grad_reverse.adaptation.validation import scores
from grad_reverse.adaptation.validation.outputs import Outputs
from grad_reverse.adaptation.validation.validators import score_all, score_candidates, validator
from helpers.models import domains, parts


def _outputs(target):
    target = np.asarray(target, float)
    return Outputs(target, target, np.zeros(len(target), int), target, target)


# --- EnsV ----------------------------------------------------------------------

# Three candidates' probabilities on five target points (two classes). The
# ensemble's mean of P(class 0) per point: 0.5333, 0.4333, 0.4667, 0.4167,
# 0.6167, so its pseudo-labels are 0, 1, 1, 1, 0. Point 4 is where averaging
# differs from a majority vote of the candidates' classes (which says 1).
POOL = (
    [[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4], [0.95, 0.05]],  # classes 0 0 1 0 0: agrees at 0, 2, 4
    [[0.6, 0.4], [0.2, 0.8], [0.4, 0.6], [0.45, 0.55], [0.45, 0.55]],  # 0 1 1 1 1: agrees at 0, 1, 2, 3
    [[0.1, 0.9], [0.3, 0.7], [0.7, 0.3], [0.2, 0.8], [0.45, 0.55]],  # 1 1 0 1 1: agrees at 1, 3
)


def test_ensemble_agreement_by_hand():
    np.testing.assert_allclose(scores.ensemble_agreement([np.array(p) for p in POOL]), [3 / 5, 4 / 5, 2 / 5])


def test_ensemble_validation_scores_each_candidate_against_the_pools_average():
    scored = EnsembleValidation().score_pool([_outputs(p) for p in POOL])
    np.testing.assert_allclose(scored, [0.6, 0.8, 0.4])
    # One candidate alone agrees with itself everywhere.
    np.testing.assert_allclose(EnsembleValidation().score_pool([_outputs(POOL[0])]), [1.0])


def test_ensemble_validation_refuses_one_model_and_the_callback():
    keras.utils.set_random_seed(0)
    softmax = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2, activation="softmax")])
    x = np.zeros((6, 2), "float32")
    pool_message = "scores a pool of candidates at once.*select_without_labels"
    with pytest.raises(ValueError, match=pool_message):
        EnsembleValidation()(softmax, x, np.zeros(6), x)
    with pytest.raises(ValueError, match=pool_message):
        validator("ensv").score(_outputs(POOL[0]))
    with pytest.raises(ValueError, match="ValidatorCallback: EnsembleValidation.*" + pool_message):
        ValidatorCallback(["source_accuracy", "ensv"], x, np.zeros(6), x)
    with pytest.raises(ValueError, match=pool_message):
        score_all("t", [EnsembleValidation()], softmax, x, np.zeros(6), x, None)
    assert "ensv" in POOL_VALIDATORS and "ensv" not in VALIDATORS
    with pytest.raises(ValueError, match="same target points"):
        scores.ensemble_agreement([np.array(POOL[0]), np.array(POOL[1])[:4]])


def test_score_candidates_scores_the_pool_and_each_model():
    x_source, y_source, x_target = domains(0, n_source=40, n_target=30)
    candidates = {name: DANN(*parts(seed)) for seed, name in enumerate(("plain", "a", "b"))}
    for model in candidates.values():
        model.compile("adam", "binary_crossentropy")
    table = score_candidates(
        "t", [validator("ensv"), validator("source_accuracy")], candidates, x_source, y_source, x_target, None
    )
    p = {n: scores.probabilities("t", m.predict(x_target, verbose=0), False) for n, m in candidates.items()}
    expected = scores.ensemble_agreement([p[n] for n in candidates])
    assert [table[n]["ensv"] for n in candidates] == pytest.approx(list(expected))
    assert all(set(row) == {"ensv", "source_accuracy"} for row in table.values())


# --- MixVal ----------------------------------------------------------------------


def _sign_classifier():
    """Softmax over logits (-10 x, 10 x): class 1 exactly where the one input x > 0."""
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(2, activation="softmax")])
    model.set_weights([np.array([[-10.0, 10.0]], "float32"), np.zeros(2, "float32")])
    return model


@pytest.mark.parametrize(
    "ratio, expected",
    [
        # Partners swapped (seed 0's permutation of 2 points is [1, 0]); x = 1 (class 1), -1.1 (class 0).
        # 0.55: 0.55 - 0.45 * 1.1 = 0.055 > 0 (class 1, x's: hit); 0.55 * -1.1 + 0.45 = -0.155 (class 0: hit).
        (0.55, 1.0),
        # 0.52: 0.52 - 0.48 * 1.1 = -0.008 (class 0: miss); -0.572 + 0.48 = -0.092 (class 0: hit).
        (0.52, 0.5),
        # 0.45 (< 0.5: the partner's class expected): 0.45 - 0.605 = -0.155 (class 0 = partner's: hit);
        # -0.495 + 0.55 = 0.055 (class 1 = partner's: hit).
        (0.45, 1.0),
    ],
)
def test_mixval_mixes_at_its_ratio_by_hand(ratio, expected):
    assert list(np.random.RandomState(0).permutation(2)) == [1, 0]
    x = np.array([[1.0], [-1.1]], "float32")
    # Both mixtures are inter-cluster (the two points' classes differ): the score is its share.
    assert MixVal(ratio=ratio, seed=0)(_sign_classifier(), x, np.array([1, 0]), x) == pytest.approx(expected)


def test_mixed_sample_consistency_by_hand():
    p = np.eye(2)[[0, 0, 1, 1]]  # pseudo-labels 0 0 1 1
    permutation = np.array([1, 2, 3, 0])  # partners' labels 0 1 1 0: points 0 and 2 intra, 1 and 3 inter
    mixed = np.eye(2)[[0, 1, 1, 0]]
    # ratio >= 0.5, own labels 0 0 1 1: hits T F T F: intra 2/2, inter 0/2, mean 0.5.
    assert scores.mixed_sample_consistency(p, mixed, permutation, 0.55) == pytest.approx(0.5)
    # ratio < 0.5, partners' labels 0 1 1 0: every mixture hit.
    assert scores.mixed_sample_consistency(p, mixed, permutation, 0.45) == pytest.approx(1.0)
    # Only intra-cluster pairs: their share alone.
    assert scores.mixed_sample_consistency(p, np.eye(2)[[0, 1, 1, 1]], np.array([1, 0, 3, 2]), 0.55) == 0.75


def test_mixval_refuses_a_ratio_outside_0_1():
    for ratio in (0.0, 1.0, -0.2):
        with pytest.raises(ValueError, match="ratio must be between 0 and 1"):
            MixVal(ratio=ratio)


# --- BNM -------------------------------------------------------------------------


def test_batch_nuclear_norm_by_hand():
    """pytorch-adapt 0.0.83's BNMValidator scores -BNMLoss, BNMLoss(logits) =
    -torch.linalg.norm(softmax(logits), "nuc") / n: the nuclear norm of the
    probabilities over the points."""
    bnm = BatchNuclearNorm()
    # Confident and diverse: singular values 1, 1: 2 / 2.
    assert bnm.score(_outputs([[1.0, 0.0], [0.0, 1.0]])) == pytest.approx(1.0)
    # Collapsed onto one class: one singular value, sqrt(2): sqrt(2) / 2.
    assert bnm.score(_outputs([[1.0, 0.0], [1.0, 0.0]])) == pytest.approx(math.sqrt(2) / 2)
    # Unsure: rank one, the singular value the Frobenius norm, 1: 1 / 2.
    assert bnm.score(_outputs([[0.5, 0.5], [0.5, 0.5]])) == pytest.approx(0.5)
    # Another route to the nuclear norm: the square roots of p^T p's eigenvalues.
    p = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0.6, 0.1, 0.3]])
    eigenvalues = np.linalg.eigvalsh(p.T @ p)
    assert bnm.score(_outputs(p)) == pytest.approx(np.sum(np.sqrt(np.clip(eigenvalues, 0, None))) / 4, rel=1e-9)
