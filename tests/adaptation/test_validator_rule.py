"""The default choice without target labels (`grad_reverse.adaptation.validation.rule`):
the held-out source gate, the ensemble ranking among the gated, the ties;
numbers written out by hand."""

import math

import numpy as np
import pytest

from grad_reverse.adaptation.validation import rule


def test_the_gate_margin_is_the_held_out_samples_own_noise():
    # 60 points, plain perfect: p = 61/62, margin = 2 sqrt(2 p (1 - p) / 60).
    p = 61 / 62
    assert rule.gate_margin(1.0, 60) == pytest.approx(2 * math.sqrt(2 * p * (1 - p) / 60))
    assert rule.gate_margin(1.0, 60) == pytest.approx(0.04600, abs=1e-5)  # 2.8 of 60 points
    # 2000 points at 0.9: p = 1801/2002, a margin of about 1.9 points.
    p = 1801 / 2002
    assert rule.gate_margin(0.9, 2000) == pytest.approx(2 * math.sqrt(2 * p * (1 - p) / 2000))
    assert rule.gate_margin(0.9, 2000) < rule.gate_margin(0.9, 200)  # more points, a narrower gate
    with pytest.raises(ValueError, match="at least one held-out source point"):
        rule.gate_margin(1.0, 0)


def one_hot(classes, k=3, confidence=0.8):
    p = np.full((len(classes), k), (1 - confidence) / (k - 1))
    p[np.arange(len(classes)), classes] = confidence
    return p


def test_the_gated_candidate_agreeing_most_with_the_gated_ensemble_wins():
    # Target points' predicted classes, by hand. The ensemble of the gated
    # (plain, a, b) takes the majority per point: [0, 1, 2, 2, 1, 0].
    predictions = {
        "plain": [0, 1, 2, 0, 0, 0],  # agrees on points 0, 1, 2, 5: 4 of 6
        "a": [0, 1, 2, 2, 1, 0],  # agrees on all 6
        "b": [1, 1, 1, 2, 1, 0],  # agrees on 1, 3, 4, 5: 4 of 6
        "collapsed": [2, 2, 2, 2, 2, 2],  # refused by the gate: takes no part in the ensemble
    }
    probabilities = {n: one_hot(c) for n, c in predictions.items()}
    accuracy = {"plain": 0.95, "a": 0.94, "b": 0.95, "collapsed": 0.60}
    chosen, table = rule.choose(accuracy, probabilities, 200, "plain")
    assert chosen == "a"
    assert table["a"][rule.NAME] == pytest.approx(1.0)
    assert table["plain"][rule.NAME] == pytest.approx(4 / 6)
    assert table["b"][rule.NAME] == pytest.approx(4 / 6)
    assert math.isnan(table["collapsed"][rule.NAME]) and table["collapsed"]["gated"] == 0.0
    assert [table[n]["gated"] for n in ("plain", "a", "b")] == [1.0, 1.0, 1.0]


def test_a_candidate_below_the_gate_cannot_win_even_when_it_agrees_most():
    predictions = {"plain": [0, 1, 2], "low": [0, 1, 2]}
    probabilities = {n: one_hot(c) for n, c in predictions.items()}
    # margin at 0.9 on 100 points: 2 sqrt(2 * (91/102) * (11/102) / 100) = 0.0878
    chosen, table = rule.choose({"plain": 0.9, "low": 0.81}, probabilities, 100, "plain")
    assert chosen == "plain" and table["low"]["gated"] == 0.0
    chosen, table = rule.choose({"plain": 0.9, "low": 0.82}, probabilities, 100, "plain")
    assert table["low"]["gated"] == 1.0


def test_ties_go_to_plain_then_source_accuracy_then_name_whatever_the_order():
    same = one_hot([0, 1, 2, 1])
    probabilities = {"zeta": same, "plain": same, "alpha": same, "beta": same}
    accuracy = {"zeta": 0.97, "plain": 0.96, "alpha": 0.96, "beta": 0.97}
    assert rule.choose(accuracy, probabilities, 500, "plain")[0] == "plain"
    without_plain_tie = dict(probabilities, plain=one_hot([2, 2, 2, 0]))
    for order in (["zeta", "plain", "alpha", "beta"], ["beta", "alpha", "plain", "zeta"]):
        chosen, _ = rule.choose({n: accuracy[n] for n in order}, {n: without_plain_tie[n] for n in order}, 500, "plain")
        assert chosen == "beta", order  # beta and zeta tie on agreement and accuracy: the name decides


def test_the_rule_needs_the_plain_network():
    with pytest.raises(ValueError, match="plain network 'plain'"):
        rule.choose({"a": 1.0}, {"a": one_hot([0])}, 10, "plain")
