"""make-servable's gate: DST is written only when every serving signature ran and matched.

Each case is a model that has it: a signature whose outputs differ between
two runs (it adds the wall-clock time), a signature with a string input (no inputs
can be generated for it, so it is not run), and a SavedModel with two
MetaGraphs holding the `serve` tag, the second of which differs. Each is
checked through the Python API (the exception), the command (the exit status
and its message) and the directory (no DST, no hidden folder left).
"""

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

import grad_reverse
from grad_reverse import serving
from grad_reverse.serving import constants, servable, verify
from helpers.serving import keras_dann, keras_export, run_make_servable

LAMBDA = 0.3
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def clock(x):
    """The wall-clock seconds modulo 1000, broadcast like x: SRC's and DST's runs
    are seconds apart, so they never agree. (Not a random op: with a global seed
    set, as Keras' set_random_seed does, a saved random op repeats itself.)"""
    return tf.zeros_like(x) + tf.cast(tf.timestamp() % 1000.0, x.dtype)


class Noisy(tf.Module):
    """`serve` is deterministic; `noisy` adds the time, so no two runs agree."""

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def serve(self, x):
        return {"y": grad_reverse.grad_reverse(x, LAMBDA) * 2.0}

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def noisy(self, x):
        return {"y": grad_reverse.grad_reverse(x, LAMBDA) + clock(x)}


class WithText(tf.Module):
    """A number signature and one whose input is a string tensor."""

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def serve(self, x):
        return {"y": grad_reverse.grad_reverse(x, LAMBDA) * 2.0}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def text_length(self, text):
        length = tf.cast(tf.strings.length(text), tf.float32)
        return {"length": grad_reverse.grad_reverse(length, LAMBDA)}


def save_module(module: tf.Module, path: Path, names: list) -> Path:
    tf.saved_model.save(module, str(path), signatures={name: getattr(module, name) for name in names})
    return path


def save_two_meta_graphs(path: Path, second_noisy: bool) -> Path:
    """A TF1 SavedModel with MetaGraphs ['serve'] and ['gpu', 'serve'], each with GradReverse."""
    predict = tf.compat.v1.saved_model.predict_signature_def
    builder = tf.compat.v1.saved_model.Builder(str(path))
    for tags in (["serve"], ["serve", "gpu"]):
        with tf.Graph().as_default():
            x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
            w = tf.compat.v1.get_variable("w", initializer=tf.constant([1.0, -2.0, 0.5]))
            y = grad_reverse.grad_reverse(x * w, LAMBDA)
            if tags == ["serve"]:
                y = y + 1.0
            elif second_noisy:
                y = y + clock(x)
            signatures = {"serving_default": predict({"x": x}, {"y": y})}
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                if tags == ["serve"]:
                    builder.add_meta_graph_and_variables(session, tags, signature_def_map=signatures)
                else:
                    builder.add_meta_graph(tags, signature_def_map=signatures)
    builder.save()
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("gate")
    return {
        "noisy": save_module(Noisy(), root / "noisy", ["serve", "noisy"]),
        "text": save_module(WithText(), root / "text", ["serve", "text_length"]),
        "two_meta_graphs": save_two_meta_graphs(root / "two_meta_graphs", second_noisy=False),
        "two_meta_graphs_noisy": save_two_meta_graphs(root / "two_meta_graphs_noisy", second_noisy=True),
    }


def assert_nothing_written(tmp_path: Path) -> None:
    """No DST and no hidden staging folder beside it."""
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------- different outputs ----


def test_signature_that_differs_stops_with_not_servable_error(models, tmp_path):
    out = io.StringIO()
    with pytest.raises(servable.NotServableError) as raised:
        serving.make_servable(models["noisy"], tmp_path / "dst", out=out)
    assert not isinstance(raised.value, servable.UnverifiedError)
    assert "['serve'] 'noisy'" in str(raised.value) and "do not give the same outputs" in str(raised.value)
    assert "['serve'] 'serve'" not in str(raised.value)  # the deterministic one matched
    assert "signature 'noisy': different: output 'y': not bitwise equal" in out.getvalue()
    assert "OK" not in out.getvalue()
    assert_nothing_written(tmp_path)


def test_signature_that_differs_exits_1_with_no_dst(capsys, models, tmp_path):
    code, out, err = run_make_servable(capsys, models["noisy"], tmp_path / "dst")
    assert code == constants.EXIT_FAILED == 1
    assert err.startswith("make-servable: FAIL: signatures ['serve'] 'noisy' do not give the same outputs")
    assert "OK" not in out
    assert_nothing_written(tmp_path)


def test_allow_unverified_does_not_let_a_difference_through(capsys, models, tmp_path):
    code, _, err = run_make_servable(capsys, models["noisy"], tmp_path / "dst", "--allow-unverified")
    assert code == 1 and "do not give the same outputs" in err
    assert_nothing_written(tmp_path)


def test_verify_reports_outputs_that_differ(tmp_path):
    # The comparison itself: a model with other weights, same signatures.
    keras_export(keras_dann(), tmp_path / "small")
    model = keras_dann()
    model.get_layer("label").kernel.assign(model.get_layer("label").kernel + 1.0)
    keras_export(model, tmp_path / "with_op")
    serving.make_servable(tmp_path / "with_op", tmp_path / "other", verify=False, out=io.StringIO())
    meta_graph = serving.read_saved_model(tmp_path / "small").meta_graphs[0]
    results = verify.verify(tmp_path / "small", tmp_path / "other", meta_graph, ["serve"])
    assert {r.key: r.status for r in results} == {"serve": "different", "serving_default": "different"}
    assert all("output 'label': not bitwise equal" in r.detail and r.tags == ("serve",) for r in results)


# ----------------------------------------------------- signatures not run ----


def test_string_input_signature_is_not_run_and_stops_the_run(models, tmp_path):
    out = io.StringIO()
    with pytest.raises(servable.UnverifiedError) as raised:
        serving.make_servable(models["text"], tmp_path / "dst", out=out)
    message = str(raised.value)
    assert "['serve'] 'text_length' (input 'text' is string" in message and "--allow-unverified" in message
    assert "signature 'serve': equal" in out.getvalue()
    assert "signature 'text_length': not run" in out.getvalue()
    assert_nothing_written(tmp_path)


def test_string_input_signature_exits_3_and_allow_unverified_writes_dst(capsys, models, tmp_path):
    dst = tmp_path / "dst"
    code, out, err = run_make_servable(capsys, models["text"], dst)
    assert code == constants.EXIT_UNVERIFIED == 3
    assert err.startswith("make-servable: UNVERIFIED: not proven equal to SRC: ['serve'] 'text_length'")
    assert_nothing_written(tmp_path)

    code, out, err = run_make_servable(capsys, models["text"], dst, "--allow-unverified")
    assert code == 0 and err == ""
    last = out.strip().splitlines()[-1]
    assert last.startswith(f"OK, NOT FULLY VERIFIED: {dst} holds only stock TensorFlow ops; 1 signature(s)")
    assert "not run: ['serve'] 'text_length' (input 'text' is string" in last
    assert (dst / "saved_model.pb").is_file() and sorted(p.name for p in tmp_path.iterdir()) == ["dst"]


def test_the_exit_status_reaches_the_shell(models, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "grad_reverse", "make-servable", str(models["text"]), str(tmp_path / "dst")],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=600,
    )
    assert result.returncode == 3, result.stderr
    assert "make-servable: UNVERIFIED:" in result.stderr and "Traceback" not in result.stderr
    assert_nothing_written(tmp_path)


def test_model_without_a_serving_meta_graph_is_unverified(capsys, tmp_path):
    src = tmp_path / "src"
    builder = tf.compat.v1.saved_model.Builder(str(src))
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None], name="x")
        y = grad_reverse.grad_reverse(x, LAMBDA)
        with tf.compat.v1.Session() as session:
            signatures = {"train": tf.compat.v1.saved_model.predict_signature_def({"x": x}, {"y": y})}
            builder.add_meta_graph_and_variables(session, ["train"], signature_def_map=signatures)
    builder.save()
    code, out, err = run_make_servable(capsys, src, tmp_path / "dst")
    assert code == 3 and "no MetaGraph holds the tag 'serve'" in err
    assert "verify: MetaGraph ['train'] not run" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_no_verify_says_so_in_the_last_line(capsys, models, tmp_path):
    dst = tmp_path / "dst"
    code, out, _ = run_make_servable(capsys, models["text"], dst, "--no-verify")
    assert code == 0
    assert out.strip().splitlines()[-1] == (
        f"OK, NOT VERIFIED: {dst} holds only stock TensorFlow ops; outputs not compared (--no-verify)."
    )


# --------------------------------------------------- every serving MetaGraph ----


def test_every_meta_graph_holding_serve_is_verified(models, tmp_path):
    dst = tmp_path / "dst"
    out = io.StringIO()
    report = serving.make_servable(models["two_meta_graphs"], dst, out=out)
    assert {(r.tags, r.key, r.status) for r in report.verified} == {
        (("serve",), "serving_default", "equal"),
        (("gpu", "serve"), "serving_default", "equal"),
    }
    assert "verify: ['gpu', 'serve'] signature 'serving_default': equal" in out.getvalue()
    assert out.getvalue().strip().splitlines()[-1].startswith(f"OK: {dst} holds only stock TensorFlow ops; all 2 ")
    # Both MetaGraphs load by their tags from DST and run without the op library's help.
    assert [sorted(m.meta_info_def.tags) for m in serving.read_saved_model(dst).meta_graphs] == [
        ["serve"],
        ["gpu", "serve"],
    ]


def test_a_second_serving_meta_graph_that_differs_stops_the_run(capsys, models, tmp_path):
    code, out, err = run_make_servable(capsys, models["two_meta_graphs_noisy"], tmp_path / "dst")
    assert code == 1
    assert "signatures ['gpu', 'serve'] 'serving_default' do not give the same outputs" in err
    assert "verify: ['serve'] signature 'serving_default': equal" in out
    assert_nothing_written(tmp_path)


def test_failed_check_exits_1_and_writes_no_dst(capsys, monkeypatch, tmp_path):
    # A signature that still needs a non-stock op after the rewrite (another
    # library's op, say): here, stock ops are pretended to exclude Mul.
    src = save_module(Noisy(), tmp_path / "src", ["serve"])
    monkeypatch.setattr(servable, "stock_op_types", lambda: serving.stock_op_types() - {"Mul"})
    code, _, err = run_make_servable(capsys, src, tmp_path / "dst", "--no-verify")
    assert code == 1 and "make-servable: FAIL:" in err and "Mul" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]
