"""The validators (grad_reverse.adaptation.validation.validators): each score against
values computed by hand on tiny inputs, the outputs read from every kind of
label head, and the errors for bad input. Peers: test_validator_peers.py;
the callback and the selection: test_validator_selection.py."""

import math

import numpy as np
import pytest

from grad_reverse._keras import keras
from grad_reverse.adaptation import (
    DANN,
    VALIDATORS,
    DeepEmbeddedValidation,
    InformationMaximization,
    PredictionEntropy,
    SoftNeighborhoodDensity,
    SourceAccuracy,
)
from grad_reverse.adaptation.validation import scores
from helpers.models import domains, parts


def _entropy(row):
    return -sum(p * math.log(p) for p in row if p > 0)


# --- the arithmetic, by hand -------------------------------------------------


def test_probabilities_from_each_kind_of_head():
    np.testing.assert_allclose(scores.probabilities("t", [[0.2], [1.0]], False), [[0.8, 0.2], [0.0, 1.0]])
    np.testing.assert_allclose(scores.probabilities("t", [[0.0], [math.log(3.0)]], True), [[0.5, 0.5], [0.25, 0.75]])
    np.testing.assert_allclose(scores.probabilities("t", [[0.1, 0.9]], False), [[0.1, 0.9]])
    np.testing.assert_allclose(scores.probabilities("t", [[0.0, math.log(3.0)]], True), [[0.25, 0.75]])


def test_prediction_entropy_by_hand():
    p = np.array([[0.5, 0.5], [1.0, 0.0], [0.2, 0.8]])
    expected = -(math.log(2.0) + 0.0 + _entropy([0.2, 0.8])) / 3
    assert scores.prediction_entropy(p) == pytest.approx(expected, rel=1e-12)


def test_information_maximization_by_hand():
    p = np.array([[0.5, 0.5], [1.0, 0.0]])
    # Mean prediction [0.75, 0.25]; mean entropy (ln 2 + 0) / 2.
    expected = _entropy([0.75, 0.25]) - math.log(2.0) / 2
    assert scores.information_maximization(p) == pytest.approx(expected, rel=1e-12)
    # All points on one class: no diversity; the same confidence, a lower score.
    assert scores.information_maximization(np.array([[1.0, 0.0], [1.0, 0.0]])) == pytest.approx(0.0)


def _snd_by_hand(points, temperature):
    """Each point: softmax over [its cosine similarities to the others; -1/T for itself] / T ..."""
    unit = [np.asarray(p, float) / np.linalg.norm(p) for p in points]
    total = 0.0
    for i, a in enumerate(unit):
        logits = [(-1.0 if i == j else float(a @ b)) / temperature for j, b in enumerate(unit)]
        z = sum(math.exp(v) for v in logits)
        total += _entropy([math.exp(v) / z for v in logits])
    return total / len(unit)


@pytest.mark.parametrize("temperature", [1.0, 0.5, 0.05])
def test_soft_neighborhood_density_by_hand(temperature):
    points = [[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.5, 0.5]]
    expected = _snd_by_hand(points, temperature)
    assert scores.soft_neighborhood_density(np.array(points), temperature) == pytest.approx(expected, rel=1e-9)
    # Worked in blocks of rows, the same number.
    assert scores.soft_neighborhood_density(np.array(points), temperature, block=3) == pytest.approx(expected, rel=1e-9)


def test_soft_neighborhood_density_reads_its_temperature():
    points = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    assert SoftNeighborhoodDensity(temperature=1.0).score(_outputs(target=points)) == pytest.approx(
        _snd_by_hand(points, 1.0), rel=1e-9
    )
    assert SoftNeighborhoodDensity(temperature=0.05).score(_outputs(target=points)) == pytest.approx(
        _snd_by_hand(points, 0.05), rel=1e-9
    )


def test_deep_embedded_risk_uses_the_control_variate():
    # Constant losses: whatever the weights, the control variate gives the loss itself
    # (eta = -cov(w l, w) / var(w) = -1; 2 + (-1)(2) + 1 = 1), where the weighted mean alone gives 2.
    assert scores.deep_embedded_risk(np.array([1.0, 2.0, 3.0]), np.ones(3)) == pytest.approx(1.0, rel=1e-12)
    # Equal weights: no variance, eta = 0, the mean loss.
    assert scores.deep_embedded_risk(np.ones(3), np.array([1.0, 2.0, 6.0])) == pytest.approx(3.0)
    # By hand: w = [1, 3], l = [2, 0]: w l = [2, 0], cov = -2, var = 2, eta = 1: 1 + 2 - 1 = 2.
    assert scores.deep_embedded_risk(np.array([1.0, 3.0]), np.array([2.0, 0.0])) == pytest.approx(2.0)


def test_importance_weights_are_one_where_the_domains_cannot_be_told_apart():
    rng = np.random.default_rng(0)
    same = rng.normal(size=(200, 2))
    weights = scores.importance_weights(same[:100], same[100:], same[:10])
    np.testing.assert_allclose(weights, 1.0, atol=0.25)
    # Points far into the target's side weigh more than points on the source's.
    shifted = scores.importance_weights(same[:100], same[100:] + 2.0, np.array([[2.0, 2.0], [-1.0, -1.0]]))
    assert shifted[0] > 10 * shifted[1]


# --- on models -----------------------------------------------------------------


def _outputs(target, source=None, labels=None):
    from grad_reverse.adaptation.validation.validators import Outputs

    target = np.asarray(target, float)
    source = target if source is None else np.asarray(source, float)
    labels = np.zeros(len(source), int) if labels is None else np.asarray(labels)
    return Outputs(source, source, labels, target, target)


@pytest.fixture(scope="module")
def trained():
    x_source, y_source, x_target = domains(0)
    model = DANN(*parts(0), lambda_max=1.0)
    model.compile(keras.optimizers.Adam(0.01), "binary_crossentropy")
    model.fit(x_source, y_source, target=x_target, batch_size=32, steps_per_epoch=20, seed=0, verbose=0)
    return model, x_source, y_source, x_target


def test_every_validator_scores_a_model_higher_is_better(trained):
    model, x_source, y_source, x_target = trained
    for name, cls in VALIDATORS.items():
        score = cls()(model, x_source, y_source, x_target)
        assert np.isfinite(score), name
    p = np.asarray(model.predict(x_source, verbose=0))[:, 0]
    assert SourceAccuracy()(model, x_source, y_source, x_target) == pytest.approx(
        np.mean((p > 0.5) == (y_source[:, 0] > 0.5))
    )
    assert PredictionEntropy()(model, x_source, y_source, x_target) <= 0.0
    assert InformationMaximization()(model, x_source, y_source, x_target) <= math.log(2.0) + 1e-9


def test_dev_reads_the_feature_extractor_on_a_model(trained):
    model, x_source, y_source, x_target = trained
    features = lambda x: np.asarray(model.feature_extractor.predict(x, verbose=0))  # noqa: E731
    p = scores.probabilities("t", model.predict(x_source, verbose=0), False)
    dev = DeepEmbeddedValidation()
    train, validation = dev.split(len(x_source))
    weights = scores.importance_weights(features(x_source)[train], features(x_target), features(x_source)[validation])
    labels = y_source[:, 0].astype(int)
    expected = -scores.deep_embedded_risk(weights, scores.cross_entropy(p[validation], labels[validation]))
    assert dev(model, x_source, y_source, x_target) == pytest.approx(expected, rel=1e-6)


def test_a_plain_keras_classifier_softmax_logits_and_one_hot_labels():
    keras.utils.set_random_seed(0)
    softmax = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, activation="softmax")])
    logits = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3)])
    logits.set_weights(softmax.get_weights())
    # A linear head is a classifier's logits when its loss says so (else it may be a regression).
    logits.compile(loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    x = np.random.default_rng(0).normal(size=(20, 2)).astype("float32")
    y = np.arange(20) % 3
    for cls in VALIDATORS.values():
        a = cls()(softmax, x, y, x + 1.0)
        b = cls()(logits, x, np.eye(3)[y], x + 1.0)  # told logits from the loss; one-hot labels
        assert a == pytest.approx(b, rel=1e-5), cls.__name__


# --- bad input -----------------------------------------------------------------


def test_bad_input_is_named():
    keras.utils.set_random_seed(0)
    relu = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, activation="relu")])
    x = np.zeros((10, 2), "float32")
    with pytest.raises(ValueError, match="cannot tell whether it outputs logits or probabilities.*'relu'"):
        SourceAccuracy()(relu, x, np.zeros(10), x)
    softmax = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, activation="softmax")])
    with pytest.raises(ValueError, match="needs at least 1 held-out source points and 2 target points, got 10 and 1"):
        SoftNeighborhoodDensity()(softmax, x, np.zeros(10), x[:1])
    with pytest.raises(ValueError, match="needs at least 6 held-out source points.*got 3"):
        DeepEmbeddedValidation()(softmax, x[:3], np.zeros(3), x)
    with pytest.raises(ValueError, match="x_source and y_source must hold the same points, got 10 and 9"):
        SourceAccuracy()(softmax, x, np.zeros(9), x)
    with pytest.raises(ValueError, match=r"points of the same shape, got \(2,\) and \(3,\)"):
        SourceAccuracy()(softmax, x, np.zeros(10), np.zeros((4, 3)))
    with pytest.raises(ValueError, match="class numbers 0 .. 2"):
        SourceAccuracy()(softmax, x, np.full(10, 5), x)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        SoftNeighborhoodDensity(temperature=0)
    sigmoids = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, activation="sigmoid")])
    with pytest.raises(ValueError, match="not class probabilities"):
        SourceAccuracy()(sigmoids, x + 1.0, np.zeros(10), x)


def test_source_accuracy_and_alignment_by_hand():
    from grad_reverse.adaptation import SourceAccuracyAndAlignment

    rng = np.random.default_rng(0)
    # Features that tell the domains apart perfectly: domain error 0, the score is accuracy - 1.
    apart = _outputs(target=rng.normal(size=(40, 2)) + 10.0, source=rng.normal(size=(40, 2)) - 10.0)
    assert scores.domain_error(apart.source_features, apart.target_features) == 0.0
    accuracy = scores.accuracy(apart.source_probabilities, apart.source_labels)
    assert SourceAccuracyAndAlignment().score(apart) == pytest.approx(accuracy - 1.0)
    # One distribution for both: the classifier is near chance, the score near the accuracy.
    same = rng.normal(size=(400, 2))
    assert abs(scores.domain_error(same[:200], same[200:]) - 0.5) < 0.1
    # Domains of unequal size that a line separates: still told apart (equal counts drawn).
    assert scores.domain_error(rng.normal(size=(30, 2)) - 3.0, rng.normal(size=(300, 2)) + 3.0) == 0.0


# --- classifiers only ----------------------------------------------------------------


def test_a_regression_head_is_refused_and_a_logits_classifier_is_not():
    from grad_reverse.adaptation import MDD

    keras.utils.set_random_seed(0)
    x, labels = np.random.default_rng(0).normal(size=(12, 2)).astype("float32"), np.arange(12) % 3

    def linear(units, loss=None):
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(units)])
        if loss is not None:
            model.compile(loss=loss)
        return model

    with pytest.raises(ValueError, match="regression loss 'mse'; the validators score classifiers"):
        SourceAccuracy()(linear(1, "mse"), x, labels % 2, x)
    with pytest.raises(ValueError, match="regression loss 'mean_absolute_error'; the validators score classifiers"):
        SourceAccuracy()(linear(3, keras.losses.MeanAbsoluteError()), x, labels, x, from_logits=True)
    with pytest.raises(ValueError, match="not compiled, so it may be a regression.*pass from_logits=True"):
        SourceAccuracy()(linear(3), x, labels, x)
    # A classifier's logits: told from its cross-entropy loss, or by from_logits.
    classifier = linear(3, keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    expected = np.mean(np.asarray(classifier.predict(x, verbose=0)).argmax(axis=1) == labels)
    assert (
        SourceAccuracy()(classifier, x, labels, x)
        == SourceAccuracy()(classifier, x, labels, x, from_logits=True)
        == expected
    )
    features = keras.Sequential([keras.Input((2,)), keras.layers.Dense(4, activation="tanh")])
    head = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    regression = MDD(features, head, form="regression")
    regression.compile("adam", "mse")
    for from_logits in (None, True):
        with pytest.raises(ValueError, match="MDD of form 'regression'; the validators score classifiers"):
            SourceAccuracy()(regression, x, labels % 2, x, from_logits=from_logits)


def test_source_and_alignment_stays_within_minus_1_and_1(monkeypatch):
    from grad_reverse.adaptation import SourceAccuracyAndAlignment

    # Held-out halves can make a domain classifier err more than half the time: no better than chance.
    monkeypatch.setattr(scores, "domain_error", lambda *args: 0.7)
    outputs = _outputs(target=[[0.2, 0.8], [0.9, 0.1]], source=[[0.2, 0.8], [0.9, 0.1]], labels=[1, 1])
    assert SourceAccuracyAndAlignment().score(outputs) == pytest.approx(0.5)  # accuracy 1/2, alignment term 0


def test_feature_validators_compare_the_same_layer_or_refuse():
    from grad_reverse.adaptation.validation.validators import check_candidates, validator

    plain = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, activation="sigmoid")])
    candidates = {"plain": plain, "dann": DANN(*parts(0))}
    for name in ("dev", "source_and_alignment", SoftNeighborhoodDensity(on="features")):
        with pytest.raises(ValueError, match=r"\['plain'\] have no feature extractor.*domain_loss_weight=0"):
            check_candidates("t", candidates, [validator(name)])
    check_candidates("t", candidates, [validator(n) for n in ("source_accuracy", "snd", "im", "mixval", "ensv")])
    check_candidates("t", {"plain": DANN(*parts(1)), "dann": DANN(*parts(0))}, [validator("dev")])
    # A list of candidates: what is accepted is named.
    with pytest.raises(ValueError, match=r"candidates must be a dict \{name: trained model\}.*got a list"):
        check_candidates("t", [plain, plain], [])


def test_the_manuals_reverse_name_says_how_to_make_it():
    from grad_reverse.adaptation.validation.validators import validator

    with pytest.raises(ValueError, match=r"build it as ReverseValidator\(make_model\)"):
        validator("reverse")
