"""`Student`: a network taught on the target by a fixed teacher, on every Keras
backend (`.ci/run`'s step 5b runs this file on JAX and PyTorch too, its
TensorFlow 2.15 row on Keras 2).

The teaching test's data make the teacher's labels and the source's
extrapolation disagree on the target: source points spread along x0 and
labeled by x0 > 0, target points spread along x1, and a teacher that labels
by x0 + x1 > 0 (on the source, about x0 > 0; on the target, about x1 > 0). A
student that learns from the teacher follows x1 on the target; one that
learns from the source alone, or from its own predictions, does not."""

from __future__ import annotations

import numpy as np
import pytest

from grad_reverse._keras import keras
from grad_reverse.adaptation import ProbabilityEnsemble, Student

# keras.ops' (Keras 3, any backend: a PyTorch tensor that requires grad too), or numpy's (Keras 2).
to_numpy = getattr(getattr(keras, "ops", None), "convert_to_numpy", np.asarray)


def _points(seed: int = 0, n: int = 256) -> tuple:
    rng = np.random.default_rng(seed)
    x_source = np.stack([rng.standard_normal(n), 0.2 * rng.standard_normal(n)], axis=1).astype("float32")
    x_target = np.stack([0.2 * rng.standard_normal(n), rng.standard_normal(n)], axis=1).astype("float32")
    return x_source, (x_source[:, 0] > 0).astype("float32").reshape(-1, 1), x_target


def _dense(inputs: int, units: int, activation: str):
    return keras.Sequential([keras.Input((inputs,)), keras.layers.Dense(units, activation=activation)])


def _teacher(x_point: np.ndarray):
    keras.utils.set_random_seed(0)
    member = _dense(2, 1, "sigmoid")
    member.layers[-1].set_weights([np.array([[4.0], [4.0]], "float32"), np.zeros(1, "float32")])
    teacher = ProbabilityEnsemble([member])
    teacher(x_point)
    return teacher


def _student(teacher, seed: int = 1, **kwargs) -> Student:
    keras.utils.set_random_seed(seed)
    student = Student(_dense(2, 8, "tanh"), _dense(8, 1, "sigmoid"), teacher, **kwargs)
    student.compile(keras.optimizers.Adam(0.02), "binary_crossentropy")
    return student


@pytest.fixture(scope="module")
def taught():
    """One student taught for 300 steps (about 3 s), shared by the tests that read it."""
    x_source, y_source, x_target = _points()
    student = _student(_teacher(x_source[:1]))
    history = student.fit(
        x_source, y_source, target=x_target, batch_size=128, epochs=3, steps_per_epoch=100, seed=0, verbose=0
    )
    return student, history, (x_source, y_source, x_target)


def _agreement(model, x: np.ndarray, labels: np.ndarray) -> float:
    p = np.asarray(model.predict(x, verbose=0))[:, 0]
    return float(np.mean((p > 0.5) == labels))


def test_the_student_follows_the_teacher_on_the_target_and_the_labels_on_the_source(taught):
    student, _, (x_source, y_source, x_target) = taught
    assert _agreement(student, x_target, x_target[:, 1] > 0) >= 0.8  # the teacher's labeling there (0.84 here)
    assert _agreement(student, x_source, y_source[:, 0] > 0.5) >= 0.9


def test_the_student_logs_its_target_terms(taught):
    _, history, _ = taught
    share = history.history["pseudo_label_share"]
    assert 0.0 < share[-1] <= 1.0
    assert history.history["lambda"][-1] > history.history["lambda"][0] >= 0.0  # the ramp
    assert np.isfinite(history.history["target_entropy"][-1])


def test_calling_the_student_is_its_own_network_only(taught):
    student, _, (_, _, x_target) = taught
    direct = student.label_head(student.feature_extractor(x_target[:16], training=False), training=False)
    called = student(x_target[:16], training=False)
    np.testing.assert_array_equal(to_numpy(called), to_numpy(direct))


def test_a_student_without_the_target_term_does_not_follow_the_teacher():
    # The control for the first test: the same fit with the target term's weight at 0 (its own fit,
    # about 3 s here: a shared one cannot have the term both on and off).
    x_source, y_source, x_target = _points()
    student = _student(_teacher(x_source[:1]), lambda_max=0.0)
    student.fit(x_source, y_source, target=x_target, batch_size=128, epochs=3, steps_per_epoch=100, seed=0, verbose=0)
    assert _agreement(student, x_target, x_target[:, 1] > 0) < 0.6  # 0.52 here


def test_the_student_saves_and_loads_with_its_teacher(taught, tmp_path):
    student, _, (_, _, x_target) = taught
    path = tmp_path / "student.keras"
    student.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, Student) and isinstance(loaded.teacher, ProbabilityEnsemble)
    np.testing.assert_array_equal(
        np.asarray(loaded.predict(x_target, verbose=0)), np.asarray(student.predict(x_target, verbose=0))
    )
    np.testing.assert_array_equal(
        np.asarray(loaded.teacher.predict(x_target, verbose=0)),
        np.asarray(student.teacher.predict(x_target, verbose=0)),
    )


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"teacher": "ensemble"}, TypeError, "teacher must be a Keras model or layer"),
        ({"confidence": 0.0}, ValueError, r"confidence must be in \(0, 1\]"),
        ({"confidence": 1.5}, ValueError, r"confidence must be in \(0, 1\]"),
        ({"entropy_weight": -1.0}, ValueError, "entropy_weight >= 0"),
        ({"confidence": float("nan")}, ValueError, "confidence"),
    ],
)
def test_a_bad_student_is_refused_with_what_is_accepted(kwargs, error, message):
    x_source, _, _ = _points(n=4)
    arguments = {"teacher": _teacher(x_source[:1]), **kwargs}
    with pytest.raises(error, match=message):
        Student(_dense(2, 8, "tanh"), _dense(8, 1, "sigmoid"), **arguments)


def test_a_teacher_over_other_classes_is_refused_before_any_step():
    x_source, y_source, x_target = _points(n=32)
    three = ProbabilityEnsemble([_dense(2, 3, "softmax")])
    three(x_source[:1])
    student = _student(three)
    with pytest.raises(ValueError, match="accepted: a teacher over the label head's classes"):
        student.fit(x_source, y_source, target=x_target, batch_size=16, epochs=1, steps_per_epoch=1, verbose=0)
    assert int(to_numpy(student.optimizer.iterations)) == 0
