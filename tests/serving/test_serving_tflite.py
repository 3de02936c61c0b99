"""Beyond TF Serving: a rewritten Keras export converts to TFLite and runs there.

TFLite's kernels (XNNPACK on CPU) sum and approximate tanh differently from
TensorFlow's, so outputs agree to float32 rounding, not bit for bit
(measured on TensorFlow 2.21: max abs difference 5e-7 on outputs of size ~1).
"""

import io
import warnings

import numpy as np
import pytest
import tensorflow as tf

from grad_reverse import serving
from helpers.serving import keras_dann, keras_export


def tflite_interpreter_class():
    """LiteRT's interpreter if installed, else TensorFlow's own (deprecated, still in 2.21)."""
    try:
        from ai_edge_litert.interpreter import Interpreter

        return Interpreter
    except ImportError:
        return getattr(getattr(tf, "lite", None), "Interpreter", None)


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")
def test_rewritten_keras_export_converts_to_tflite_and_matches_the_saved_model(tmp_path):
    converter_class = getattr(getattr(tf, "lite", None), "TFLiteConverter", None)
    interpreter_class = tflite_interpreter_class()
    if converter_class is None or interpreter_class is None:
        pytest.skip("this TensorFlow has no tf.lite converter/interpreter; `pip install ai-edge-litert`")
    keras_export(keras_dann(), tmp_path / "with_op")
    dst = tmp_path / "servable"
    serving.make_servable(tmp_path / "with_op", dst, verify=False, out=io.StringIO())

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        flatbuffer = converter_class.from_saved_model(str(dst)).convert()
        interpreter = interpreter_class(model_content=flatbuffer)
    run = interpreter.get_signature_runner("serving_default")
    x = (np.random.default_rng(0).standard_normal((64, 3)) * 4).astype(np.float32)
    got = run(x=x)
    want = tf.saved_model.load(str(dst)).signatures["serving_default"](x=tf.constant(x))
    assert sorted(got) == sorted(want) == ["domain", "label"]
    for key in want:
        assert got[key].dtype == np.float32
        np.testing.assert_allclose(got[key], want[key].numpy(), rtol=1e-5, atol=2e-6, err_msg=key)
