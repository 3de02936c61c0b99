"""The default choice without target labels (`grad_reverse.adaptation.validation.rule`):
the held-out source gate, the ranking among the gated, the ties; numbers
written out by hand."""

import math

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


def ranking(scores, asked=None):
    """A ranking function that gives `scores` and records which candidates it was asked about."""

    def rank(gated):
        if asked is not None:
            asked.extend(gated)
        return {n: scores[n] for n in gated}

    return rank


def test_the_gated_candidate_ranked_highest_wins_and_the_refused_are_not_ranked():
    # MixVal scores by hand; "collapsed" would rank highest (one class everywhere is
    # "consistent"), but its source accuracy is far below the gate.
    mixval = {"plain": 0.71, "a": 0.78, "b": 0.74, "collapsed": 1.0}
    accuracy = {"plain": 0.95, "a": 0.94, "b": 0.95, "collapsed": 0.60}
    asked = []
    chosen, table = rule.choose(accuracy, ranking(mixval, asked), 200, "plain")
    assert chosen == "a"
    assert sorted(asked) == ["a", "b", "plain"]  # the refused candidate costs no ranking
    assert table["a"][rule.NAME] == pytest.approx(0.78)
    assert math.isnan(table["collapsed"][rule.NAME]) and table["collapsed"]["gated"] == 0.0
    assert [table[n]["gated"] for n in ("plain", "a", "b")] == [1.0, 1.0, 1.0]
    assert table["b"]["source_accuracy"] == 0.95


def test_a_candidate_below_the_gate_cannot_win_even_when_it_ranks_highest():
    mixval = {"plain": 0.7, "low": 0.9}
    # margin at 0.9 on 100 points: 2 sqrt(2 * (91/102) * (11/102) / 100) = 0.0878
    chosen, table = rule.choose({"plain": 0.9, "low": 0.81}, ranking(mixval), 100, "plain")
    assert chosen == "plain" and table["low"]["gated"] == 0.0
    chosen, table = rule.choose({"plain": 0.9, "low": 0.82}, ranking(mixval), 100, "plain")
    assert chosen == "low" and table["low"]["gated"] == 1.0


def test_ties_go_to_plain_then_source_accuracy_then_name_whatever_the_order():
    accuracy = {"zeta": 0.97, "plain": 0.96, "alpha": 0.96, "beta": 0.97}
    assert rule.choose(accuracy, ranking(dict.fromkeys(accuracy, 0.8)), 500, "plain")[0] == "plain"
    tied_above_plain = {"zeta": 0.8, "plain": 0.7, "alpha": 0.8, "beta": 0.8}
    for order in (["zeta", "plain", "alpha", "beta"], ["beta", "alpha", "plain", "zeta"]):
        chosen, _ = rule.choose({n: accuracy[n] for n in order}, ranking(tied_above_plain), 500, "plain")
        assert chosen == "beta", order  # beta and zeta tie on the score and accuracy: the name decides


def test_the_rule_needs_the_plain_network():
    with pytest.raises(ValueError, match="plain network 'plain'"):
        rule.choose({"a": 1.0}, ranking({"a": 0.5}), 10, "plain")


def test_the_gate_floor_is_the_plain_networks_even_when_another_candidate_is_more_accurate():
    # The plain network is not the most accurate candidate: "sharp" is. The floor is
    # plain's: 0.85 - 2 sqrt(2 * (86/102) * (16/102) / 100) = 0.85 - 0.1029 = 0.7471.
    # "near" (0.76) passes it and ranks highest among the gated; "far" (0.74) is refused
    # though it ranks higher still. A floor from the most accurate candidate (0.95 - 0.0665
    # = 0.8835) would refuse "near" and choose "sharp"; one from the least accurate would
    # let "far" in and choose it.
    accuracy = {"plain": 0.85, "sharp": 0.95, "near": 0.76, "far": 0.74}
    mixval = {"plain": 0.40, "sharp": 0.50, "near": 0.90, "far": 0.99}
    assert 0.85 - rule.gate_margin(0.85, 100) == pytest.approx(0.7471, abs=1e-4)
    chosen, table = rule.choose(accuracy, ranking(mixval), 100, "plain")
    assert chosen == "near"
    assert {n: table[n]["gated"] for n in accuracy} == {"plain": 1.0, "sharp": 1.0, "near": 1.0, "far": 0.0}
