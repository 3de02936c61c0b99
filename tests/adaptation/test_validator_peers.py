"""The validators' arithmetic against skada's scorers, fed the same arrays
(features, class probabilities, labels): agreement to 1e-5 relative.

skada is no dependency of the package: the README's test command skips this
file, and CI installs the `peers` extra and runs it (.ci/run, step 2).
skada's conventions differ from ours where noted: its entropy is the mean over
points and classes (ours: over points, summed over classes), and its DEV is
a risk (lower is better; ours is negated)."""

import numpy as np
import pytest

skada = pytest.importorskip("skada", reason="skada is not installed: pip install '.[peers]'")
from skada.metrics import (  # noqa: E402
    DeepEmbeddedValidation,
    MixValScorer,
    PredictionEntropyScorer,
    SoftNeighborhoodDensity,
)
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.utils import check_random_state  # noqa: E402

from grad_reverse._keras import keras  # noqa: E402
from grad_reverse.adaptation import MixVal  # noqa: E402
from grad_reverse.adaptation.validation import scores  # noqa: E402

FEATURES, CLASSES, N_SOURCE, N_TARGET = 5, 3, 60, 45


class _Features(TransformerMixin, BaseEstimator):
    """A pipeline's feature step: the first FEATURES columns of a row."""

    def fit(self, x, y=None, **kwargs):
        return self

    def transform(self, x):
        return x[:, :FEATURES]


class _GivenProbabilities(ClassifierMixin, BaseEstimator):
    """A classifier whose probabilities are the ones the test gave, looked up by the features."""

    def __init__(self, table=None):
        self.table = table

    def fit(self, x, y=None, **kwargs):
        self.classes_ = np.arange(CLASSES)
        return self

    def predict_proba(self, features):
        keys, probabilities = self.table
        return np.stack([probabilities[keys[f.tobytes()]] for f in features])


@pytest.fixture(scope="module")
def arrays():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(N_SOURCE + N_TARGET, FEATURES))
    features[N_SOURCE:] += 0.6  # a shift for the domain classifier to find
    logits = rng.normal(size=(N_SOURCE + N_TARGET, CLASSES)) * 2.0
    probabilities = scores.probabilities("test", logits, from_logits=True)
    labels = np.concatenate([rng.integers(0, CLASSES, N_SOURCE), -np.ones(N_TARGET, int)])
    domains = np.concatenate([np.ones(N_SOURCE, int), -2 * np.ones(N_TARGET, int)])
    keys = {f.tobytes(): i for i, f in enumerate(features)}
    pipeline = skada.make_da_pipeline(_Features(), _GivenProbabilities((keys, probabilities)))
    x = np.concatenate([features, probabilities], axis=1)
    pipeline.fit(x, labels, sample_domain=domains)
    return {
        "x": x,
        "labels": labels,
        "domains": domains,
        "pipeline": pipeline,
        "features": features,
        "p": probabilities,
    }


def _skada(scorer, a):
    return scorer(a["pipeline"], a["x"], a["labels"], sample_domain=a["domains"])


def test_prediction_entropy_agrees_with_skada(arrays):
    theirs = _skada(PredictionEntropyScorer(), arrays)  # -mean over points and classes
    ours = scores.prediction_entropy(arrays["p"][N_SOURCE:])
    np.testing.assert_allclose(ours, theirs * CLASSES, rtol=1e-5)


@pytest.mark.parametrize("temperature", [0.05, 0.5])
def test_soft_neighborhood_density_agrees_with_skada(arrays, temperature):
    theirs = _skada(SoftNeighborhoodDensity(T=temperature), arrays)
    ours = scores.soft_neighborhood_density(arrays["p"][N_SOURCE:], temperature)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)


def _skada_split():
    """skada's split of the source points (DeepEmbeddedValidation(random_state=0)), drawn again here."""
    return train_test_split(np.arange(N_SOURCE), test_size=0.33, random_state=check_random_state(0))


def test_importance_weights_agree_with_skadas_domain_classifier(arrays):
    train, validation = _skada_split()
    f = arrays["features"]
    # skada's recipe: scikit-learn's logistic regression (converged), source = 1.
    classifier = LogisticRegression(tol=1e-12, max_iter=100000)
    classifier.fit(np.concatenate([f[train], f[N_SOURCE:]]), np.r_[np.ones(len(train)), np.zeros(N_TARGET)])
    p = classifier.predict_proba(f[validation])
    theirs = len(train) / N_TARGET * p[:, 0] / p[:, 1]
    np.testing.assert_allclose(scores.importance_weights(f[train], f[N_SOURCE:], f[validation]), theirs, rtol=1e-5)


def test_deep_embedded_validation_differs_from_skada_only_by_its_broadcast(arrays):
    """skada 0.6's DeepEmbeddedValidation multiplies weights [n, 1] by losses [n],
    which broadcasts to [n, n]: its mean and covariance are then over that
    matrix, not the paper's per-point products. Ours, given that same
    broadcast, gives skada's number; the paper's formula itself is pinned by
    test_validators.py's hand-computed values."""
    converged = LogisticRegression(tol=1e-12, max_iter=100000)
    theirs = _skada(DeepEmbeddedValidation(domain_classifier=converged, random_state=0), arrays)
    train, validation = _skada_split()
    f, p, y = arrays["features"], arrays["p"], arrays["labels"]
    weights = scores.importance_weights(f[train], f[N_SOURCE:], f[validation])[:, None]
    weighted = weights * scores.cross_entropy(p[validation], y[validation])  # [n, n], as skada's
    eta = -np.cov(np.concatenate([weighted, weights], axis=1), rowvar=False)[0, 1] / np.var(weights, ddof=1)
    np.testing.assert_allclose(np.mean(weighted) + eta * np.mean(weights) - eta, -theirs, rtol=1e-5)


class _KerasClassifier(ClassifierMixin, BaseEstimator):
    """A Keras classifier as scikit-learn sees one: its class the most probable one."""

    def __init__(self, model=None):
        self.model = model

    def fit(self, x, y=None, **kwargs):
        self.classes_ = np.arange(CLASSES)
        return self

    def predict_proba(self, x):
        return np.asarray(self.model.predict(x, verbose=0))

    def predict(self, x):
        return self.predict_proba(x).argmax(axis=1)


@pytest.mark.parametrize("ratio, seed", [(0.55, 0), (0.55, 1), (0.3, 2), (0.8, 3)])
def test_mixval_agrees_with_skada_on_the_same_mixtures(arrays, ratio, seed):
    """Both draw the partners as `numpy.random.RandomState(seed).permutation(n)`
    (skada through scikit-learn's `check_random_state(seed)`), so they mix the
    same pairs, in the same float64 arithmetic: the same permutation, not a
    comparison within sampling error."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(CLASSES, activation="softmax")])
    model.set_weights([w * 3.0 for w in model.get_weights()])  # confident enough that mixing moves classes
    pipeline = skada.make_da_pipeline(_KerasClassifier(model))
    pipeline.fit(arrays["features"], arrays["labels"], sample_domain=arrays["domains"])
    theirs = MixValScorer(alpha=ratio, random_state=seed)(
        pipeline, arrays["features"], arrays["labels"], sample_domain=arrays["domains"]
    )
    f, y = arrays["features"], arrays["labels"]
    ours = MixVal(ratio=ratio, seed=seed)(model, f[:N_SOURCE], y[:N_SOURCE], f[N_SOURCE:])
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    assert 0.0 < ours < 1.0, "a score of 0 or 1 would agree whatever the pairs"
