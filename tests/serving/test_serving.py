"""SavedModel round trips, serving exports, check-serving, and the C++ loader.

The C++ program (cc/tools/saved_model_runner.cc) loads SavedModels with
tensorflow::LoadSavedModel, the loader tensorflow_model_server embeds: without
`--library` it is what stock TF Serving can do, with our library loaded first
it is what a TF Serving build with the op linked in can do.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import grad_reverse
from grad_reverse import serving
from grad_reverse._tools import library_path
from helpers.serving import KERAS_LAMBDA, QUIET_EXPORT, X, keras_dann, keras_export, runner_outputs

NOT_REGISTERED = "Op type not registered 'GradReverse'"
LAMBDA = 0.5  # of the tf.Module model


def run_python(code: str, *args: str) -> subprocess.CompletedProcess:
    """A fresh interpreter, with this process's environment (and so its grad_reverse)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=600)


def last_json_line(result: subprocess.CompletedProcess):
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------- models ----


class DomainModule(tf.Module):
    """DANN in miniature with the functional API: features, a label head, and a
    domain head behind the gradient reversal."""

    def __init__(self):
        super().__init__()
        self.w_features = tf.Variable([[1.0, 2.0], [3.0, -1.0], [0.5, 0.25]])
        self.w_label = tf.Variable([[1.0], [-2.0]])
        self.w_domain = tf.Variable([[0.5], [1.5]])
        self.lambda_ = tf.Variable(LAMBDA, trainable=False)

    def call(self, x, training=None):
        features = tf.matmul(x, self.w_features)
        reversed_ = serving.grad_reverse_or_identity(features, self.lambda_, training=training)
        return {"label": tf.matmul(features, self.w_label), "domain": tf.matmul(reversed_, self.w_domain)}

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def train_forward(self, x):
        return self.call(x, training=True)

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def serve(self, x):
        return self.call(x, training=False)


def save_module(module: DomainModule, path: Path, serving_fn) -> Path:
    # train_forward is saved as a method either way (it has an input
    # signature), so the loaded module can be fine-tuned.
    tf.saved_model.save(module, str(path), signatures={"serving_default": serving_fn})
    return path


def keras_export_with_op(model: keras.Model, path: Path) -> Path:
    """The Keras model as a SavedModel whose `call_training` endpoint keeps the op."""
    archive = keras.export.ExportArchive()
    archive.track(model)
    spec = [tf.TensorSpec([None, 3], tf.float32, name="x")]
    archive.add_endpoint("call_training", lambda x: model(x, training=True), spec)
    archive.write_out(str(path), **QUIET_EXPORT)
    return path


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    root = tmp_path_factory.mktemp("exports")
    module = DomainModule()
    model = keras_dann()
    model_export = root / "keras_model_export"
    keras_export(model, model_export)
    serving_export = root / "keras_serving"
    serving.export_serving(model, serving_export)
    return {
        "module": module,
        "keras": model,
        # serving_default keeps GradReverse (a serving function that ignores training)
        "module_with_op": save_module(module, root / "module_with_op", module.train_forward),
        # serving_default is op-free; the saved train_forward keeps the op
        "module_serving": save_module(module, root / "module_serving", module.serve),
        "keras_with_op": keras_export_with_op(model, root / "keras_with_op"),
        "keras_model_export": model_export,
        "keras_serving": serving_export,
    }


# ------------------------------------- SavedModel with the op, fresh process ----

_FRESH_LOAD = """
import json, sys
import numpy as np
import tensorflow as tf
import grad_reverse  # loads the op and registers its gradient
import keras

module_path, keras_path = sys.argv[1:3]
x = tf.constant(json.loads(sys.argv[3]), tf.float32)
results = {}

module = tf.saved_model.load(module_path)
with tf.GradientTape(persistent=True) as tape:
    out = module.train_forward(x)
    domain_loss = tf.reduce_sum(out["domain"])
results["module_forward"] = {k: v.numpy().tolist() for k, v in out.items()}
results["module_grad_features"] = tape.gradient(domain_loss, module.w_features).numpy().tolist()
results["module_grad_domain"] = tape.gradient(domain_loss, module.w_domain).numpy().tolist()
optimizer = keras.optimizers.SGD(learning_rate=0.1)
before = module.w_features.numpy()
optimizer.apply_gradients([(tape.gradient(domain_loss, module.w_features), module.w_features)])
results["module_step"] = (module.w_features.numpy() - before).tolist()

model = tf.saved_model.load(keras_path)
with tf.GradientTape() as tape:
    tape.watch(x)
    out = model.call_training(x)
    loss = tf.reduce_sum(out["domain"])
results["keras_forward"] = {k: v.numpy().tolist() for k, v in out.items()}
results["keras_grad_x"] = tape.gradient(loss, x).numpy().tolist()
variables = model.trainable_variables
with tf.GradientTape() as tape:
    loss = tf.reduce_sum(model.call_training(x)["domain"])
grads = tape.gradient(loss, variables)
before = [v.numpy() for v in variables]
keras.optimizers.Adam(learning_rate=0.01).apply_gradients(zip(grads, variables))
results["keras_step_changed"] = sum(
    int(not np.array_equal(b, v.numpy())) for b, v in zip(before, variables))
results["keras_variables"] = len(variables)
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def fresh_load(exports):
    result = run_python(
        _FRESH_LOAD, str(exports["module_with_op"]), str(exports["keras_with_op"]), json.dumps(X.tolist())
    )
    return last_json_line(result)


def test_module_forward_equal_after_fresh_load(exports, fresh_load):
    expected = exports["module"].train_forward(X)
    for key in ("label", "domain"):
        np.testing.assert_array_equal(np.float32(fresh_load["module_forward"][key]), expected[key].numpy())


def test_module_gradients_through_loaded_function_are_reversed(exports, fresh_load):
    module = exports["module"]
    # d sum(x W_f W_d) / d W_f = x^T 1 W_d^T, reversed: times -lambda.
    plain = X.T @ np.ones((2, 1), np.float32) @ module.w_domain.numpy().T
    np.testing.assert_allclose(fresh_load["module_grad_features"], -LAMBDA * plain, rtol=1e-6)
    # The domain head is not behind the reversal.
    features = X @ module.w_features.numpy()
    np.testing.assert_allclose(fresh_load["module_grad_domain"], features.T @ np.ones((2, 1)), rtol=1e-6)


def test_module_fine_tuning_step_runs_after_fresh_load(exports, fresh_load):
    plain = X.T @ np.ones((2, 1), np.float32) @ exports["module"].w_domain.numpy().T
    # SGD: delta = -lr * grad = -0.1 * (-lambda * plain)
    np.testing.assert_allclose(fresh_load["module_step"], 0.1 * LAMBDA * plain, rtol=1e-5)


def test_keras_forward_equal_after_fresh_load(exports, fresh_load):
    expected = exports["keras"](X, training=True)
    for key in ("label", "domain"):
        # Eager Keras against the loaded graph, whose optimizer fuses
        # MatMul+BiasAdd: equal up to float32 rounding.
        np.testing.assert_allclose(fresh_load["keras_forward"][key], expected[key].numpy(), rtol=1e-6, atol=1e-7)


def test_keras_gradient_through_loaded_function_is_reversed(exports, fresh_load):
    model = exports["keras"]
    x = tf.constant(X)
    with tf.GradientTape() as tape:  # training=False: the layer passes features through
        tape.watch(x)
        loss = tf.reduce_sum(model(x, training=False)["domain"])
    plain = tape.gradient(loss, x).numpy()
    assert np.abs(plain).max() > 0
    np.testing.assert_allclose(fresh_load["keras_grad_x"], -KERAS_LAMBDA * plain, rtol=1e-5, atol=1e-7)


def test_keras_fine_tuning_step_runs_after_fresh_load(fresh_load):
    # features, label and domain Dense layers: 6 variables. label's get zero
    # gradients from the domain loss, which Adam leaves unchanged.
    assert fresh_load["keras_variables"] == 6
    assert fresh_load["keras_step_changed"] == 4


def test_loading_without_import_grad_reverse_fails_with_op_not_registered(exports):
    code = """
import sys
import tensorflow as tf
for path in sys.argv[1:]:
    try:
        tf.saved_model.load(path)
    except Exception as error:
        print(type(error).__name__, str(error).splitlines()[0])
    else:
        print("loaded", path)
"""
    result = run_python(code, str(exports["module_with_op"]), str(exports["keras_with_op"]))
    assert result.returncode == 0, result.stderr[-4000:]
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 2 and all(NOT_REGISTERED in line for line in lines), result.stdout


# ------------------------------------------------------------ check-serving ----


def check_serving_cli(path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(
        [sys.executable, "-m", "grad_reverse", "check-serving", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def test_check_serving_cli_accepts_export_serving_of_keras_model(exports):
    result = check_serving_cli(exports["keras_serving"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "signature 'serving_default': " in result.stdout
    assert "MatMul" in result.stdout and "GradReverse" not in result.stdout + result.stderr
    assert "OK:" in result.stdout


def test_check_serving_cli_rejects_keras_model_export_which_keeps_the_op(exports):
    # Keras 3's model.export calls the model with `training` unset, and the
    # layer then reverses gradients, so the op stays (docs/serving.md).
    result = check_serving_cli(exports["keras_model_export"])
    assert result.returncode == 1, result.stdout + result.stderr
    assert "not stock TensorFlow: GradReverse" in result.stdout
    assert "FAIL" in result.stderr and "GradReverse" in result.stderr


def test_check_serving_names_the_signature_that_needs_the_op(exports, capsys):
    assert serving.check_serving(exports["module_with_op"]) == 1
    out = capsys.readouterr()
    assert "signature 'serving_default': " in out.out and "not stock TensorFlow: GradReverse" in out.out
    assert "'serving_default'" in out.err and "GradReverse" in out.err


def test_check_serving_ignores_saved_functions_no_signature_calls(exports, capsys):
    # The saved train_forward keeps the op, but a server never instantiates it.
    proto = serving.read_saved_model(exports["module_serving"])
    library = proto.meta_graphs[0].graph_def.library.function
    assert any(node.op == "GradReverse" for f in library for node in f.node_def)
    ops = serving.signature_op_types(exports["module_serving"])
    assert sorted(ops) == ["__saved_model_init_op", "serving_default"]
    assert "MatMul" in ops["serving_default"] and "GradReverse" not in ops["serving_default"]
    assert serving.check_serving(exports["module_serving"]) == 0
    assert "OK:" in capsys.readouterr().out


def test_check_serving_follows_functions_called_from_branches(tmp_path):
    class Branchy(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32), tf.TensorSpec([], tf.bool)])
        def serve(self, x, flag):
            return tf.cond(flag, lambda: grad_reverse.grad_reverse(x), lambda: x * 2.0)

    module = Branchy()
    tf.saved_model.save(module, str(tmp_path), signatures=module.serve)
    ops = serving.signature_op_types(tmp_path)["serving_default"]
    assert {"GradReverse", "Mul"} <= ops
    assert serving.non_stock_op_types(tmp_path) == {"serving_default": {"GradReverse"}}


def test_stock_op_types_exclude_grad_reverse_and_python_callbacks():
    stock = serving.stock_op_types()
    assert {"MatMul", "StatefulPartitionedCall", "Identity"} <= stock
    assert not {"GradReverse", "GradReverseGrad", "EagerPyFunc"} & stock


def test_check_serving_reports_a_non_saved_model_directory(tmp_path, capsys):
    assert serving.check_serving(tmp_path) == 2
    err = capsys.readouterr().err
    assert "no saved_model.pb" in err and err.count(str(tmp_path)) == 1


def test_check_serving_reports_a_missing_path_once_as_no_such_directory(tmp_path, capsys):
    missing = tmp_path / "no_export_here"
    assert serving.check_serving(missing) == 2
    err = capsys.readouterr().err
    assert err == f"check-serving: error: {missing}: no such directory\n"


def test_check_serving_failure_names_the_rewriter(exports, capsys):
    assert serving.check_serving(exports["keras_model_export"]) == 1
    assert f"make-servable {exports['keras_model_export']} DST" in capsys.readouterr().err


def test_export_serving_makes_a_model_that_calls_the_op_regardless_of_training_servable(tmp_path):
    # export_serving is model.export + make_servable, so a direct
    # grad_reverse() call (no `training` rule) no longer blocks serving.
    inputs = keras.Input((3,))
    outputs = keras.layers.Lambda(lambda t: grad_reverse.grad_reverse(t, 1.0) * 2.0)(inputs)
    model = keras.Model(inputs, outputs)
    serving.export_serving(model, tmp_path / "export")
    assert serving.non_stock_op_types(tmp_path / "export") == {}
    loaded = tf.saved_model.load(str(tmp_path / "export"))
    np.testing.assert_array_equal(loaded.serve(tf.constant(X)).numpy(), 2.0 * X)


def test_export_serving_has_the_signatures_of_keras_model_export(exports):
    ours = serving.read_saved_model(exports["keras_serving"]).meta_graphs[0]
    keras_own = serving.read_saved_model(exports["keras_model_export"]).meta_graphs[0]
    assert sorted(ours.signature_def) == sorted(keras_own.signature_def)
    for key in keras_own.signature_def:
        assert ours.signature_def[key] == keras_own.signature_def[key], key


def test_grad_reverse_or_identity_follows_the_layer_rule():
    x = tf.constant([1.0, -2.0])
    assert serving.grad_reverse_or_identity(x, 3.0, training=False) is x
    for training in (None, True):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = serving.grad_reverse_or_identity(x, 3.0, training=training)
        np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [-3.0, -3.0])

    traced = tf.function(lambda t: serving.grad_reverse_or_identity(t, training=False))
    graph = traced.get_concrete_function(tf.TensorSpec([None], tf.float32)).graph
    assert "GradReverse" not in {op.type for op in graph.get_operations()}


# --------------------------------------------------------- the C++ loader ----


def run_runner(runner: Path, export: Path, x: np.ndarray, library: bool) -> subprocess.CompletedProcess:
    values = ",".join(repr(float(v)) for v in x.ravel())
    args = [str(runner)]
    if library:
        args += ["--library", str(library_path())]
    args += [str(export), f"x={','.join(map(str, x.shape))}:{values}"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)


def python_outputs(export: Path) -> dict:
    """The same signature run by Python (this process has the op)."""
    signature = tf.saved_model.load(str(export)).signatures["serving_default"]
    return {key: value.numpy() for key, value in signature(x=tf.constant(X)).items()}


def assert_same_outputs(actual: dict, expected: dict) -> None:
    assert sorted(actual) == sorted(expected)
    for key in expected:
        np.testing.assert_array_equal(actual[key], expected[key], err_msg=key)


@pytest.mark.parametrize("name", ["keras_serving", "module_serving"])
def test_runner_runs_serving_export_without_our_library(runner, exports, name):
    result = run_runner(runner, exports[name], X, library=False)
    assert_same_outputs(runner_outputs(result), python_outputs(exports[name]))


def test_runner_fails_on_saved_model_with_op_without_our_library(runner, exports):
    result = run_runner(runner, exports["module_with_op"], X, library=False)
    assert result.returncode != 0 and result.stdout == ""
    assert NOT_REGISTERED in result.stderr, result.stderr[-4000:]


def test_runner_runs_saved_model_with_op_with_our_library(runner, exports):
    result = run_runner(runner, exports["module_with_op"], X, library=True)
    outputs = runner_outputs(result)
    assert_same_outputs(outputs, python_outputs(exports["module_with_op"]))
    module = exports["module"]
    np.testing.assert_allclose(outputs["domain"], X @ module.w_features.numpy() @ module.w_domain.numpy(), rtol=1e-6)
