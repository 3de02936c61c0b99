"""`ProbabilityEnsemble` and the gated ensemble `select_without_labels` returns:
the mean of the members' probabilities (numpy's `scores.probabilities` is the
oracle), which candidates the source gate keeps, saving, loading and serving."""

import numpy as np
import pytest

from grad_reverse._keras import KERAS_3, keras
from grad_reverse.adaptation import DANN, ProbabilityEnsemble, select_without_labels
from grad_reverse.adaptation.validation import rule, scores
from helpers.models import domains, parts


def _linear(w, b=0.0, activation="sigmoid", seed=0):
    """A one-layer classifier of 2-d points with the given weights (no training)."""
    keras.utils.set_random_seed(seed)
    units = np.asarray(w, dtype="float32").reshape(2, -1).shape[1]
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(units, activation=activation)])
    model.layers[-1].set_weights([np.asarray(w, "float32").reshape(2, units), np.full(units, b, "float32")])
    loss = "binary_crossentropy" if units == 1 else "sparse_categorical_crossentropy"
    model.compile("sgd", keras.losses.BinaryCrossentropy(from_logits=True) if activation is None else loss)
    return model


def _two_danns(x_point):
    """Two compiled, built DANNs of different seeds (untrained)."""
    members = []
    for seed in (0, 1):
        model = DANN(*parts(seed), lambda_max=1.0)
        model.compile(keras.optimizers.Adam(0.05), "binary_crossentropy")
        model(x_point)
        members.append(model)
    return members


@pytest.fixture(scope="module")
def points():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, 2)).astype("float32")
    return x, (x[:, 0] + x[:, 1] > 0).astype("int64")


def test_the_ensemble_is_the_weighted_mean_of_its_members_probabilities(points):
    x, _ = points
    members = [_linear([2.0, 1.0]), _linear([1.0, 3.0], 0.5), _linear([0.5, -1.0], activation=None)]
    logits = [False, False, True]
    ensemble = ProbabilityEnsemble(members, from_logits=logits, member_weights=[1.0, 1.0, 2.0])
    got = np.asarray(ensemble.predict(x, verbose=0))
    each = [scores.probabilities("t", np.asarray(m.predict(x, verbose=0)), f)[:, 1] for m, f in zip(members, logits)]
    expected = (each[0] + each[1] + 2.0 * each[2]) / 4.0
    assert got.shape == (len(x), 1)
    np.testing.assert_allclose(got[:, 0], expected, rtol=1e-5, atol=1e-6)


def test_a_softmax_ensemble_outputs_one_probability_per_class(points):
    x, _ = points
    members = [_linear(np.eye(2, 3), activation="softmax"), _linear(np.ones((2, 3)), activation=None)]
    ensemble = ProbabilityEnsemble(members, from_logits=[False, True])
    got = np.asarray(ensemble.predict(x, verbose=0))
    expected = np.mean(
        [scores.probabilities("t", np.asarray(m.predict(x, verbose=0)), f) for m, f in zip(members, [False, True])],
        axis=0,
    )
    assert got.shape == (len(x), 3)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"members": []}, "no members"),
        ({"from_logits": [False]}, "from_logits has 1 entries for 2 members"),
        ({"member_weights": [1.0, -1.0]}, "member_weights must be finite, >= 0 and not all zero"),
        ({"member_weights": [0.0, 0.0]}, "not all zero"),
        ({"member_names": ["a"]}, "member_names has 1 entries for 2 members"),
    ],
)
def test_a_bad_ensemble_is_refused_with_what_is_accepted(kwargs, message):
    arguments = {"members": [_linear([1.0, 1.0]), _linear([1.0, 2.0])], **kwargs}
    with pytest.raises(ValueError, match=message):
        ProbabilityEnsemble(**arguments)


def test_the_gate_decides_who_joins_where_the_plain_network_is_not_the_most_accurate(points):
    x, y = points
    candidates = {
        "plain": _linear([1.0, 0.7]),  # a little off the boundary x0 + x1 = 0
        "best": _linear([1.0, 1.0]),  # on it: more accurate than the plain network
        "near": _linear([1.0, 0.85]),
        "far": _linear([1.0, -1.0]),  # about chance on the source
    }
    selection = select_without_labels(candidates, x, y, x + 0.5)
    accuracy = {n: row["source_accuracy"] for n, row in selection.ensemble_table.items()}
    assert accuracy["best"] > accuracy["plain"] > accuracy["far"]
    floor = accuracy["plain"] - rule.gate_margin(accuracy["plain"], len(x))
    assert selection.gate_floor == pytest.approx(floor)
    expected = [n for n in candidates if accuracy[n] >= floor]
    assert selection.ensemble_members == expected and "far" not in expected and "best" in expected
    assert selection.ensemble.member_names == expected
    mean = np.mean([np.asarray(candidates[n].predict(x, verbose=0)) for n in expected], axis=0)
    np.testing.assert_allclose(np.asarray(selection.ensemble.predict(x, verbose=0)), mean, rtol=1e-5, atol=1e-6)
    report = selection.ensemble_report()
    assert "far" in report and "left out: held-out source accuracy below the gate's floor" in report


def test_the_ensemble_holds_a_candidate_just_above_the_floor_and_leaves_one_just_below(points):
    # The floor is the plain network's accuracy minus the margin, not another candidate's.
    x, y = points
    candidates = {"plain": _linear([1.0, 1.0]), "tilted": _linear([1.0, 0.0])}
    selection = select_without_labels(candidates, x, y, x)
    tilted = selection.ensemble_table["tilted"]["source_accuracy"]
    assert ("tilted" in selection.ensemble_members) == (tilted >= selection.gate_floor)
    assert selection.gate_floor == pytest.approx(1.0 - rule.gate_margin(1.0, len(x)))


@pytest.mark.skipif(not KERAS_3, reason="Keras 2 saves subclassed models as SavedModel/h5, not .keras files")
def test_the_ensemble_saves_loads_and_predicts_the_same(tmp_path):
    x_source, _, x_target = domains(0)
    ensemble = ProbabilityEnsemble(_two_danns(x_source[:1]), member_names=["plain", "dann"])
    ensemble(x_target[:1])
    path = tmp_path / "ensemble.keras"
    ensemble.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, ProbabilityEnsemble) and loaded.member_names == ["plain", "dann"]
    np.testing.assert_array_equal(
        np.asarray(loaded.predict(x_target, verbose=0)), np.asarray(ensemble.predict(x_target, verbose=0))
    )
    assert not loaded.trainable_weights


@pytest.mark.skipif(not KERAS_3, reason="export_serving's Keras 3 path (model.export) is what serves an ensemble")
def test_the_ensemble_of_danns_exports_for_stock_tensorflow_serving(tmp_path):
    from grad_reverse.serving import check_serving, export_serving

    x_source, _, _ = domains(0)
    ensemble = ProbabilityEnsemble(_two_danns(x_source[:1]))
    ensemble(x_source[:1])  # Keras exports a subclassed model once it has been called
    export_serving(ensemble, str(tmp_path / "export"), check=False)
    assert check_serving(str(tmp_path / "export")) == 0
