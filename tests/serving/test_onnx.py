"""ONNX: a Keras export made servable converts with tf2onnx and runs in ONNX Runtime.

The path docs/serving.md describes, as a user runs it: `model.export`, then
`python -m grad_reverse make-servable`, then `python -m tf2onnx.convert
--saved-model` in a process that never imports grad_reverse. ONNX Runtime's
outputs must match the SavedModel's and Keras' within float32 rounding (the
two runtimes may order a dot product's additions differently). The raw export,
still holding GradReverse, must fail to convert with the error docs/serving.md
quotes. Needs the `onnx` extra (tf2onnx, onnxruntime); skipped without it.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from helpers.serving import keras_dann, keras_export

tf2onnx = pytest.importorskip("tf2onnx", reason="tf2onnx is not installed (pip install tf2onnx onnxruntime)")
onnxruntime = pytest.importorskip(
    "onnxruntime", reason="onnxruntime is not installed (pip install tf2onnx onnxruntime)"
)
import onnx  # noqa: E402 (tf2onnx's own dependency: present when tf2onnx is)

LAMBDA = 0.3
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
# float32 rounding through two 4- and 2-wide dense layers and a tanh: a few ulps.
RTOL, ATOL = 1e-5, 1e-6


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=ENV, timeout=600)


def convert(saved_model: Path, output: Path) -> subprocess.CompletedProcess:
    # The command docs/serving.md gives, in a process without grad_reverse.
    return run("-m", "tf2onnx.convert", "--saved-model", str(saved_model), "--output", str(output))


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    root = tmp_path_factory.mktemp("onnx")
    model = keras_dann(lambda_=LAMBDA)
    raw = keras_export(model, root / "raw")
    servable = root / "servable"
    made = run("-m", "grad_reverse", "make-servable", str(raw), str(servable))
    assert made.returncode == 0, made.stderr[-4000:]
    result = convert(servable, root / "model.onnx")
    assert result.returncode == 0, result.stderr[-4000:]
    return {"model": model, "raw": raw, "servable": servable, "onnx": root / "model.onnx"}


def inputs() -> np.ndarray:
    return (np.random.default_rng(3).standard_normal((256, 3)) * 4).astype(np.float32)


def test_onnx_runtime_matches_the_saved_model_and_keras(converted):
    x = inputs()
    session = onnxruntime.InferenceSession(str(converted["onnx"]), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["x"]
    names = [o.name for o in session.get_outputs()]
    assert sorted(names) == ["domain", "label"]
    from_onnx = dict(zip(names, session.run(None, {"x": x})))

    signature = tf.saved_model.load(str(converted["servable"])).signatures["serving_default"]
    from_saved_model = {k: v.numpy() for k, v in signature(x=tf.constant(x)).items()}
    from_keras = {k: np.asarray(v) for k, v in converted["model"](x, training=False).items()}
    for reference in (from_saved_model, from_keras):
        for name in names:
            assert from_onnx[name].shape == reference[name].shape and from_onnx[name].dtype == np.float32
            np.testing.assert_allclose(from_onnx[name], reference[name], rtol=RTOL, atol=ATOL, err_msg=name)
    # Not vacuous: the outputs vary over the batch, and the domain head is not all zeros.
    assert all(np.std(from_onnx[name]) > 0.1 for name in names)


def test_onnx_graph_has_no_grad_reverse(converted):
    model = onnx.load(str(converted["onnx"]))
    op_types = {node.op_type for node in model.graph.node}
    assert op_types and not {"GradReverse", "GradReverseGrad"} & op_types
    onnx.checker.check_model(model)


def test_raw_export_does_not_convert(converted, tmp_path):
    result = convert(converted["raw"], tmp_path / "raw.onnx")
    assert result.returncode != 0 and not (tmp_path / "raw.onnx").exists()
    assert "Op type not registered 'GradReverse'" in result.stderr
