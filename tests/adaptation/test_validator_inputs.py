"""The validators' input checks read every point, not only the first
prediction batch (`outputs.PREDICT_BATCH` points): a non-finite value past it
is refused before any model is run, by every way in. No model is trained:
the points are checked before the model is read."""

import numpy as np
import pytest

from grad_reverse._keras import keras
from grad_reverse.adaptation import SourceAccuracy, ValidatorCallback, select_without_labels
from grad_reverse.adaptation.validation.outputs import PREDICT_BATCH

FAR = PREDICT_BATCH + 37  # in the second prediction batch


def target_with_a_bad_value(value: float) -> np.ndarray:
    x = np.random.default_rng(0).normal(size=(PREDICT_BATCH + 100, 2)).astype("float32")
    x[FAR, 1] = value
    return x


def source() -> tuple:
    return np.zeros((8, 2), "float32"), np.zeros(8)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_a_non_finite_target_value_past_the_first_prediction_batch_is_refused_by_every_way_in(value):
    x_source, y_source = source()
    x_target = target_with_a_bad_value(value)
    expected = rf"x_target holds NaN or infinity \(first at point {FAR}\); accepted: finite values"
    with pytest.raises(ValueError, match=expected):
        SourceAccuracy()(object(), x_source, y_source, x_target)  # refused before the model is read
    with pytest.raises(ValueError, match=expected):
        ValidatorCallback(["source_accuracy"], x_source, y_source, x_target)
    classifier = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2, activation="softmax")])  # untrained
    with pytest.raises(ValueError, match=expected):
        select_without_labels({"plain": classifier}, x_source, y_source, x_target)


def test_a_non_finite_source_value_past_the_first_prediction_batch_is_refused():
    x_source = target_with_a_bad_value(np.nan)
    with pytest.raises(ValueError, match=rf"x_source holds NaN or infinity \(first at point {FAR}\)"):
        ValidatorCallback(["source_accuracy"], x_source, np.zeros(len(x_source)), x_source[:8])
