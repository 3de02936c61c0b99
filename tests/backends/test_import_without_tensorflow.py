"""On Keras' JAX or PyTorch backend, `from grad_reverse import GradReverse`
and the models (`DANN`, `CDAN`, `MDD`) and schedules load nothing of
TensorFlow nor the op library, and the TensorFlow-only names say they need
the TensorFlow backend. In a fresh process, so that
nothing imported by the test run counts. (.ci/run runs this where TensorFlow
is not installed at all.)"""

import importlib.util
import os
import subprocess
import sys

import pytest

from helpers.backends import BACKEND, needs_jax_or_torch

pytestmark = needs_jax_or_torch

PROBE = """
import sys
from grad_reverse import GradReverse
import grad_reverse
from grad_reverse import CDAN, DANN, MDD, DANNLambdaSchedule, DANNLearningRateSchedule, dann_lambda
import grad_reverse.adaptation
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "tf_keras")
                or m in ("grad_reverse._native.loader", "grad_reverse.ops", "grad_reverse._kernels"))
print("loaded:", loaded)
print("all:", grad_reverse.__all__)
print("class:", GradReverse.__module__)
print("models:", DANN.__module__, CDAN.__module__, MDD.__module__)
for name in ("grad_reverse", "BUILD_INFO", "SUPPORTED_DTYPES", "serving", "reference"):
    try:
        getattr(grad_reverse, name)
    except ImportError as error:
        print(name, "->", type(error).__name__, error)
    else:
        print(name, "-> no error")
try:
    from grad_reverse.serving import export_serving
except ImportError as error:
    print("export_serving ->", type(error).__name__, error)
"""


def probe() -> list:
    env = dict(os.environ, KERAS_BACKEND=BACKEND)
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_the_layer_imports_without_tensorflow_and_the_rest_says_it_needs_it():
    lines = probe()
    assert lines[0] == "loaded: []"
    assert lines[1] == (
        "all: ['CDAN', 'DANN', 'DANNLambdaSchedule', 'DANNLearningRateSchedule', 'GradReverse', 'MDD', "
        "'dann_lambda', '__version__']"
    )
    assert lines[2] == "class: grad_reverse.backend_layer"
    assert lines[3] == "models: grad_reverse.adaptation.dann grad_reverse.adaptation.cdan grad_reverse.adaptation.mdd"
    errors = lines[4:]
    assert len(errors) == 6, lines
    for line in errors:
        name, _, message = line.partition(" -> ")
        assert message.startswith("TensorFlowOnly "), line
        assert f"grad_reverse.{name}" in message or name == "export_serving", line
        assert f"needs Keras on TensorFlow, and Keras runs on {BACKEND} in this process" in message, line
        assert "KERAS_BACKEND=tensorflow with TensorFlow installed" in message, line


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is not None, reason="TensorFlow is installed here")
def test_without_tensorflow_the_tensorflow_backend_says_what_to_install_and_where_the_layer_runs():
    env = dict(os.environ, KERAS_BACKEND="tensorflow")
    result = subprocess.run([sys.executable, "-c", "import grad_reverse"], capture_output=True, text=True, env=env)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: grad_reverse needs TensorFlow 2.15 or newer"), last
    assert "and none is installed here: `pip install tensorflow`" in last, last
    assert "set KERAS_BACKEND=jax or torch" in last
