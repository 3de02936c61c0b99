"""A trained DANN, CDAN+E or MDD saved as `.keras` on JAX or PyTorch loads on every
backend (TensorFlow included, with its native op) and predicts what it predicted
when saved; tests/adaptation/test_keras_fixtures.py is the way from TensorFlow to
the others. fixtures/make_model_fixtures.py wrote the files on each backend."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import grad_reverse
from grad_reverse._keras import KERAS_3, keras

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CLASSES = {"dann": "DANN", "cdan_e": "CDAN", "mdd": "MDD"}

pytestmark = pytest.mark.skipif(not KERAS_3, reason="the files are Keras 3's .keras format")


@pytest.mark.parametrize("saved_on", ["jax", "torch"])
@pytest.mark.parametrize("method", sorted(CLASSES))
def test_a_model_saved_on_another_backend_loads_and_predicts_the_same(method, saved_on):
    expected = np.load(FIXTURES / f"models_saved_on_{saved_on}.npz")
    model = keras.models.load_model(FIXTURES / f"{method}_saved_on_{saved_on}.keras")
    assert type(model) is getattr(grad_reverse, CLASSES[method])
    assert model.feature_extractor_optimizer is not None  # the compile arguments came along
    np.testing.assert_allclose(model.predict(expected["probe"], verbose=0), expected[method], rtol=1e-5, atol=1e-6)
