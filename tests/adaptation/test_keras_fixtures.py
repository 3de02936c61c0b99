"""`.keras` files saved by earlier code keep loading and predicting the same.

tests/adaptation/fixtures/make_keras_fixtures.py wrote the files and the outputs they
predicted when saved; a renamed module, class or registered name, or a
changed config key, fails here.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import grad_reverse
from grad_reverse._keras import KERAS_3, keras

# The files are Keras 3's format (saved under Keras 3.15); Keras 2 has a `.keras` format of its own.
pytestmark = pytest.mark.skipif(not KERAS_3, reason="the fixtures are Keras 3 .keras files")

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
EXPECTED = np.load(os.path.join(FIXTURES, "keras_fixtures_expected.npz"))
CLASSES = {
    "dann": grad_reverse.DANN,
    "cdan": grad_reverse.CDAN,
    "cdan_e": grad_reverse.CDAN,
    "mdd": grad_reverse.MDD,
    "grad_reverse_layer": keras.Sequential,
}


@pytest.mark.parametrize("stem", sorted(CLASSES))
def test_saved_model_loads_and_predicts_as_recorded(stem):
    model = keras.models.load_model(os.path.join(FIXTURES, f"{stem}.keras"))
    assert type(model) is CLASSES[stem]
    np.testing.assert_allclose(model.predict(EXPECTED["probe"], verbose=0), EXPECTED[stem], rtol=1e-5, atol=1e-6)


def test_saved_cdan_e_keeps_its_options_and_compile_arguments():
    model = keras.models.load_model(os.path.join(FIXTURES, "cdan_e.keras"))
    assert (model.entropy_conditioning, model.randomized, model.randomized_dim, model.map_seed) == (True, True, 6, 3)
    assert model.feature_extractor_optimizer is not None


def test_saved_layer_keeps_its_lambda():
    model = keras.models.load_model(os.path.join(FIXTURES, "grad_reverse_layer.keras"))
    layer = next(layer for layer in model.layers if isinstance(layer, grad_reverse.GradReverse))
    assert float(np.asarray(layer.get_config()["lambda_"])) == pytest.approx(0.7)
