"""make-servable: any SavedModel with GradReverse, rewritten for stock TF Serving.

Each test model is rewritten once (module fixture). The tests then check the
rewrite independently of the rewriter's own proof: DST passes check-serving
(the command), a fresh process that never imports grad_reverse loads DST with
tf.saved_model.load and gives outputs bitwise equal to SRC's (run here, with
the op), SRC's files are unchanged, and the C++ loader TF Serving embeds runs
DST without the op library and matches SRC run with it.
"""

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import grad_reverse
from grad_reverse import serving
from grad_reverse.serving import rewrite, verify
from helpers.serving import X, keras_dann, keras_export, runner_outputs, tree_hash

LAMBDA = 0.3  # not exact in binary: the gradient rewrite must round like the kernel
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


# ----------------------------------------------------------------- models ----


class ControlFlow(tf.Module):
    """Two GRLs, one inside tf.cond and one inside tf.while_loop, a Variable
    lambda, float16 inputs; plus a signature that differentiates through both
    (so GradReverseGrad sits inside the gradient's If/While functions)."""

    def __init__(self):
        super().__init__()
        self.lambda_ = tf.Variable(LAMBDA)
        self.scale = tf.Variable(tf.constant([1.5, -0.5, 2.0], tf.float16))

    def forward(self, x):
        reverse = grad_reverse.grad_reverse
        y = tf.cond(tf.reduce_sum(x) > 0, lambda: reverse(x * self.scale, self.lambda_), lambda: x - self.scale)

        def body(i, acc):
            return i + 1, reverse(acc * tf.constant(0.5, tf.float16), self.lambda_) + x

        _, z = tf.while_loop(lambda i, acc: i < 3, body, [tf.constant(0), y])
        return {"y": y, "z": z}

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float16)])
    def serve(self, x):
        return self.forward(x)

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float16)])
    def gradient(self, x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            z = self.forward(x)["z"]
        return {"dx": tape.gradient(z, x)}


class Gradients(tf.Module):
    """Signatures that return GradReverse's gradient in each dtype."""

    def __init__(self):
        super().__init__()
        self.lambda_ = tf.Variable(LAMBDA)

    def gradient(self, x, dy):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = grad_reverse.grad_reverse(x, self.lambda_)
        return {"dx": tape.gradient(y, x, output_gradients=dy)}


GRADIENT_DTYPES = [tf.float16, tf.bfloat16, tf.float32, tf.float64]


def save_gradients(path: Path) -> Path:
    module = Gradients()
    signatures = {}
    for dtype in GRADIENT_DTYPES:
        spec = tf.TensorSpec([None], dtype)
        function = tf.function(module.gradient, input_signature=[spec, spec])
        signatures[f"grad_{dtype.name}"] = function.get_concrete_function()
    tf.saved_model.save(module, str(path), signatures=signatures)
    return path


def save_tf1(path: Path) -> Path:
    """A TF1-style SavedModel (graph + session + Builder), as text, with a gradient signature."""
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        w = tf.compat.v1.get_variable("w", initializer=tf.constant([[1.0, -2.0], [0.5, 3.0], [-1.5, 0.25]]))
        lambda_ = tf.compat.v1.placeholder_with_default(tf.constant(LAMBDA), [], name="lambda")
        h = grad_reverse.grad_reverse(tf.matmul(x, w), lambda_)
        y = tf.tanh(h) * 2.0
        dx = tf.gradients(tf.reduce_sum(y), x)[0]
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            builder = tf.compat.v1.saved_model.Builder(str(path))
            predict = tf.compat.v1.saved_model.predict_signature_def
            builder.add_meta_graph_and_variables(
                session,
                ["serve"],
                signature_def_map={
                    "serving_default": predict({"x": x}, {"y": y}),
                    "gradient": predict({"x": x}, {"dx": dx}),
                },
            )
            builder.save(as_text=True)
    return path


def save_control_flow(path: Path) -> Path:
    module = ControlFlow()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve, "gradient": module.gradient})
    return path


def all_op_types(path: Path) -> set:
    proto = serving.read_saved_model(path)
    ops = set()
    for meta_graph in proto.meta_graphs:
        ops.update(node.op for node in meta_graph.graph_def.node)
        for function in meta_graph.graph_def.library.function:
            ops.update(node.op for node in function.node_def)
    return ops


MODELS = ["keras_model_export", "keras_saved_model_save", "control_flow", "tf1_builder", "already_servable"]


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory):
    """{name: (src, dst, src hash before, printed report)} for each test model."""
    root = tmp_path_factory.mktemp("make_servable")
    model = keras_dann(lambda_=LAMBDA)
    sources = {}
    sources["keras_model_export"] = root / "keras_model_export"
    keras_export(model, sources["keras_model_export"])
    sources["keras_saved_model_save"] = root / "keras_saved_model_save"
    tf.saved_model.save(model, str(sources["keras_saved_model_save"]))
    sources["control_flow"] = save_control_flow(root / "control_flow")
    sources["tf1_builder"] = save_tf1(root / "tf1_builder")
    sources["already_servable"] = root / "already_servable"
    serving.export_serving(model, sources["already_servable"])
    sources["gradients"] = save_gradients(root / "gradients")
    result = {}
    for name, src in sources.items():
        before = tree_hash(src)
        out = io.StringIO()
        dst = root / f"{name}_servable"
        serving.make_servable(src, dst, out=out)
        result[name] = {"src": src, "dst": dst, "hash": before, "report": out.getvalue()}
    return result


# ------------------------------------------------------- the rewritten models ----


@pytest.mark.parametrize("name", MODELS)
def test_rewritten_model_passes_check_serving_command(rewritten, name):
    result = subprocess.run(
        [sys.executable, "-m", "grad_reverse", "check-serving", str(rewritten[name]["dst"])],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK:" in result.stdout


@pytest.mark.parametrize("name", [*MODELS, "gradients"])
def test_rewritten_model_has_no_grad_reverse_op_anywhere(rewritten, name):
    assert not set(rewrite.REPLACED_OP_TYPES) & all_op_types(rewritten[name]["dst"])
    # The MetaGraph's own list of the op types it uses says so too.
    for meta_graph in serving.read_saved_model(rewritten[name]["dst"]).meta_graphs:
        listed = {op.name for op in meta_graph.meta_info_def.stripped_op_list.op}
        assert not set(rewrite.REPLACED_OP_TYPES) & listed
        if name != "already_servable":
            assert "Identity" in listed


@pytest.mark.parametrize("name", [*MODELS, "gradients"])
def test_source_files_are_unchanged(rewritten, name):
    assert tree_hash(rewritten[name]["src"]) == rewritten[name]["hash"]


@pytest.mark.parametrize("name", MODELS)
def test_variables_and_assets_are_copied_unchanged(rewritten, name):
    src, dst = rewritten[name]["src"], rewritten[name]["dst"]
    copied = {k: v for k, v in tree_hash(src).items() if not k.startswith(("saved_model.pb", "fingerprint"))}
    assert copied and {k: tree_hash(dst)[k] for k in copied} == copied


def test_reports_say_what_was_replaced_where(rewritten):
    report = rewritten["control_flow"]["report"]
    # Forward: one GRL in a cond branch, one in the loop body; the gradient
    # signature traces its own copies of both. Its backward is GradReverseGrad
    # unless GRAD_REVERSE_BACKWARD chose stock ops (then no such node exists).
    native_backward = grad_reverse.ops.BACKWARD.kernel == "native"
    assert re.search(r"\b\d+ GradReverse\b", report)
    assert bool(re.search(r"\b\d+ GradReverseGrad\b", report)) == native_backward
    assert any(line.strip().startswith("cond_true") for line in report.splitlines())
    assert any(line.strip().startswith("while_body") for line in report.splitlines())
    tf1 = rewritten["tf1_builder"]["report"]
    replaced = "1 GradReverse, 1 GradReverseGrad" if native_backward else "1 GradReverse"
    assert f"{rewrite.TOP_LEVEL}: {replaced}" in tf1
    assert "already servable" in rewritten["already_servable"]["report"]
    for name in MODELS:  # every signature ran and matched: the last line says so
        report, dst = rewritten[name]["report"], rewritten[name]["dst"]
        assert "verify: ['serve'] signature" in report and "not run" not in report
        assert report.strip().splitlines()[-1].startswith(f"OK: {dst} holds only stock TensorFlow ops; all ")


def test_already_servable_model_is_copied_byte_for_byte(rewritten):
    result = rewritten["already_servable"]
    assert tree_hash(result["dst"]) == result["hash"]


def test_signatures_and_object_graph_are_unchanged(rewritten):
    for name in MODELS:
        src = serving.read_saved_model(rewritten[name]["src"]).meta_graphs[0]
        dst = serving.read_saved_model(rewritten[name]["dst"]).meta_graphs[0]
        assert src.signature_def == dst.signature_def, name
        assert src.object_graph_def == dst.object_graph_def, name
    # The TF1 export was text and stays text.
    assert (rewritten["tf1_builder"]["dst"] / "saved_model.pbtxt").is_file()


def test_fingerprint_matches_the_rewritten_graph(rewritten):
    dst = rewritten["keras_model_export"]["dst"]
    src = rewritten["keras_model_export"]["src"]
    from tensorflow.core.protobuf import fingerprint_pb2
    from tensorflow.python.saved_model.pywrap_saved_model import fingerprinting

    expected = fingerprint_pb2.FingerprintDef.FromString(fingerprinting.CreateFingerprintDef(str(dst)))
    actual = fingerprint_pb2.FingerprintDef.FromString((dst / "fingerprint.pb").read_bytes())
    if "uuid" in expected.DESCRIPTOR.fields_by_name:  # TensorFlow 2.18+: random per computation
        expected.ClearField("uuid")
        actual.ClearField("uuid")
    assert actual == expected
    assert tf.saved_model.experimental.read_fingerprint(str(dst)).saved_model_checksum != (
        tf.saved_model.experimental.read_fingerprint(str(src)).saved_model_checksum
    )


# Loads each DST with plain TensorFlow, runs every signature on the given
# inputs ({model: {"path": DST, "inputs": {signature: arguments}}} on stdin).
# One process for all the models: it never imports grad_reverse nor
# registers GradReverse (checked after the last model), so no model can load
# there thanks to another; one TensorFlow start instead of one per model. A
# model that fails to load or run gives its error, for its own test to report.
_FRESH_RUN = """
import json, sys
import numpy as np
import tensorflow as tf
from tensorflow.python.framework import op_def_registry

def run(path, inputs):
    loaded = tf.saved_model.load(path)
    out = {}
    for key, arguments in inputs.items():
        feeds = {}
        for name, (dtype, shape, hex_bytes) in arguments.items():
            array = np.frombuffer(bytes.fromhex(hex_bytes), tf.as_dtype(dtype).as_numpy_dtype).reshape(shape)
            feeds[name] = tf.constant(array)
        results = loaded.signatures[key](**feeds)
        out[key] = {k: [v.dtype.name, v.shape.as_list(), v.numpy().tobytes().hex()] for k, v in results.items()}
    return out

out = {}
for model, job in json.load(sys.stdin).items():
    try:
        out[model] = {"outputs": run(job["path"], job["inputs"])}
    except Exception as error:
        out[model] = {"error": f"{type(error).__name__}: {error}"[-3000:]}
assert not any(m.startswith("grad_reverse") for m in sys.modules), "grad_reverse was imported"
assert op_def_registry.get("GradReverse") is None, "GradReverse is registered"
print(json.dumps(out))
"""


def inputs_for(path: Path) -> dict:
    meta_graph = serving.read_saved_model(path).meta_graphs[0]
    return {
        key: verify.make_inputs(signature, seed=7)
        for key, signature in meta_graph.signature_def.items()
        if key != "__saved_model_init_op"
    }


def encode(arrays: dict) -> dict:
    return {k: [tf.as_dtype(v.dtype).name, list(v.shape), v.tobytes().hex()] for k, v in arrays.items()}


@pytest.fixture(scope="module")
def fresh_run(rewritten):
    """{model: (the inputs, {"outputs": DST's outputs} or {"error": why not})
    from a fresh process without grad_reverse}: one subprocess for every model (_FRESH_RUN)."""
    inputs = {name: inputs_for(rewritten[name]["src"]) for name in [*MODELS, "gradients"]}
    jobs = {
        name: {"path": str(rewritten[name]["dst"]), "inputs": {key: encode(args) for key, args in signatures.items()}}
        for name, signatures in inputs.items()
    }
    result = subprocess.run(
        [sys.executable, "-c", _FRESH_RUN], input=json.dumps(jobs), capture_output=True, text=True, env=ENV, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = json.loads(result.stdout.strip().splitlines()[-1])
    return {name: (inputs[name], outputs[name]) for name in inputs}


@pytest.mark.parametrize("name", [*MODELS, "gradients"])
def test_fresh_process_without_grad_reverse_runs_dst_bitwise_like_src(rewritten, fresh_run, name):
    inputs, fresh = fresh_run[name]
    assert "error" not in fresh, fresh.get("error")
    actual = fresh["outputs"]
    loaded = tf.saved_model.load(str(rewritten[name]["src"]))  # this process has the op
    expected = {
        key: encode(
            {k: v.numpy() for k, v in loaded.signatures[key](**{a: tf.constant(b) for a, b in args.items()}).items()}
        )
        for key, args in inputs.items()
    }
    assert actual == expected


def test_gradient_rewrite_rounds_like_the_kernel_in_every_dtype(rewritten):
    """-lambda*dy through stock ops against the kernel, bit for bit, on many values
    (subnormals, huge values that overflow half, infinities, NaN)."""
    src = tf.saved_model.load(str(rewritten["gradients"]["src"]))
    dst = tf.saved_model.load(str(rewritten["gradients"]["dst"]))
    rng = np.random.default_rng(3)
    base = np.concatenate(
        [
            rng.standard_normal(4000) * 10.0 ** rng.integers(-9, 6, 4000),
            [0.0, -0.0, np.inf, -np.inf, np.nan, 6.0e-8, 1e-40, 65504.0, 70000.0, 3.4e38],
        ]
    )
    for dtype in GRADIENT_DTYPES:
        dy = tf.cast(tf.constant(base, tf.float64), dtype)
        x = tf.zeros_like(dy)
        key = f"grad_{dtype.name}"
        want = src.signatures[key](x=x, dy=dy)["dx"].numpy()
        got = dst.signatures[key](x=x, dy=dy)["dx"].numpy()
        assert want.tobytes() == got.tobytes(), dtype.name
        # and the op did run with a lambda that rounds: not just a sign flip
        assert not np.array_equal(np.abs(want[:100].astype(np.float64)), np.abs(base[:100]))


# ------------------------------------------------------- the C++ loader ----


def run_cpp(runner, export: Path, key: str, x: np.ndarray, library: bool) -> subprocess.CompletedProcess:
    args = [str(runner)]
    if library:
        from grad_reverse._tools import library_path

        args += ["--library", str(library_path())]
    values = ",".join(repr(float(v)) for v in x.ravel())
    args += [str(export), f"{key}={','.join(map(str, x.shape))}:{values}"]
    return subprocess.run(args, capture_output=True, text=True, env=ENV, timeout=300)


# name: (input key, input dtype, whether SRC holds the op). Not
# keras_saved_model_save: TensorFlow's C++ loader cannot run a Keras 3 model
# saved with tf.saved_model.save even without our op (a one-Dense model fails
# with "Could not find variable label/kernel", TF 2.21 / Keras 3.15.1);
# Python's loader runs it, and its rewrite is tested above.
CPP_MODELS = {
    "keras_model_export": ("x", np.float32, True),
    "control_flow": ("x", np.float16, True),
    "tf1_builder": ("x", np.float32, True),
    "already_servable": ("x", np.float32, False),
}


@pytest.mark.parametrize("name", sorted(CPP_MODELS))
def test_cpp_loader_runs_dst_without_library_like_src_with_it(runner, rewritten, name):
    key, dtype, has_op = CPP_MODELS[name]
    x = X.astype(dtype)
    src, dst = rewritten[name]["src"], rewritten[name]["dst"]
    if has_op:
        without = run_cpp(runner, src, key, x, library=False)
        assert without.returncode != 0 and "Op type not registered 'GradReverse'" in without.stderr
    expected = runner_outputs(run_cpp(runner, src, key, x, library=True))
    actual = runner_outputs(run_cpp(runner, dst, key, x, library=False))
    assert sorted(actual) == sorted(expected)
    for output in expected:
        assert actual[output].tobytes() == expected[output].tobytes(), output
