"""The layer and the DANN model under legacy tf.keras 2 (tf-keras with
TF_USE_LEGACY_KERAS=1): build, fit, save/load (.h5 and SavedModel for the
layer, .keras for DANN). Runs in a subprocess because the
Keras flavour is fixed when TensorFlow is first imported."""

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    r"""
    import os, sys, tempfile
    import numpy as np
    import tensorflow as tf
    import grad_reverse

    import tf_keras
    assert tf.keras is tf_keras or tf.keras.__name__.startswith("tf_keras"), tf.keras
    assert issubclass(grad_reverse.GradReverse, tf_keras.layers.Layer), grad_reverse.GradReverse.__mro__

    tf_keras.utils.set_random_seed(0)
    inputs = tf_keras.Input((4,))
    features = tf_keras.layers.Dense(8, activation="relu", name="features")(inputs)
    label = tf_keras.layers.Dense(1, activation="sigmoid", name="label")(features)
    grl = grad_reverse.GradReverse(lambda_=0.5, name="grl")
    domain = tf_keras.layers.Dense(1, activation="sigmoid", name="domain")(grl(features))
    model = tf_keras.Model(inputs, [label, domain])
    model.compile(optimizer=tf_keras.optimizers.Adam(0.01), loss="binary_crossentropy")

    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 4)).astype("float32")
    y = [(x[:, :1] > 0).astype("float32"), (x[:, 1:2] > 0).astype("float32")]
    history = model.fit(x, y, batch_size=32, epochs=3, verbose=0)
    assert np.isfinite(history.history["loss"]).all()

    # The gradient through the layer is reversed and scaled.
    t = tf.constant([[1.0, 2.0]])
    with tf.GradientTape() as tape:
        tape.watch(t)
        out = grl(t, training=True)
    np.testing.assert_array_equal(tape.gradient(out, t).numpy(), [[-0.5, -0.5]])

    expected = model.predict(x, verbose=0)
    with tempfile.TemporaryDirectory() as tmp:
        h5 = os.path.join(tmp, "dann.h5")
        model.save(h5)
        loaded = tf_keras.models.load_model(h5)  # no custom_objects: registered serializable
        for a, b in zip(loaded.predict(x, verbose=0), expected):
            np.testing.assert_allclose(a, b, rtol=1e-6)
        assert loaded.get_layer("grl").lambda_ == 0.5

        saved_model = os.path.join(tmp, "dann_savedmodel")
        model.save(saved_model, save_format="tf")
        loaded = tf_keras.models.load_model(saved_model)
        for a, b in zip(loaded.predict(x, verbose=0), expected):
            np.testing.assert_allclose(a, b, rtol=1e-6)
        loaded.fit(x, y, epochs=1, verbose=0)  # and it still trains
    print("legacy keras ok")
    """
)


DANN_SCRIPT = textwrap.dedent(
    r"""
    import os, sys, tempfile
    import numpy as np
    import tf_keras
    import grad_reverse

    assert issubclass(grad_reverse.DANN, tf_keras.Model), grad_reverse.DANN.__mro__
    tf_keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x_source = rng.standard_normal((64, 3)).astype("float32")
    y_source = (x_source[:, :1] > 0).astype("float32")
    x_target = (rng.standard_normal((48, 3)) + 1.0).astype("float32")
    model = grad_reverse.DANN(
        tf_keras.Sequential([tf_keras.Input((3,)), tf_keras.layers.Dense(6, activation="relu")]),
        tf_keras.Sequential([tf_keras.Input((6,)), tf_keras.layers.Dense(1, activation="sigmoid")]),
        tf_keras.Sequential([tf_keras.Input((6,)), tf_keras.layers.Dense(1)]),
    )
    model.compile(tf_keras.optimizers.Adam(0.01), "binary_crossentropy", ["accuracy"])
    history = model.fit(x_source, y_source, target=x_target, batch_size=16, epochs=2, verbose=0)
    assert set(history.history) == {"loss", "accuracy", "domain_loss", "domain_accuracy", "lambda"}, history.history
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "dann.keras")
        model.save(path)
        loaded = tf_keras.models.load_model(path)
        assert type(loaded) is grad_reverse.DANN
        np.testing.assert_array_equal(loaded.predict(x_target, verbose=0), model.predict(x_target, verbose=0))
        loaded.fit(x_source, y_source, target=x_target, batch_size=16, epochs=1, verbose=0)
    print("legacy keras DANN ok")
    """
)


def run_under_legacy_keras(script: str) -> subprocess.CompletedProcess:
    try:
        import tf_keras  # noqa: F401
    except ImportError:
        if os.environ.get("GRAD_REVERSE_REQUIRE_LEGACY_KERAS"):
            raise
        pytest.skip("tf-keras is not installed (CI installs it for this test: see .ci/run)")
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def test_layer_builds_fits_and_round_trips_under_legacy_tf_keras():
    assert "legacy keras ok" in run_under_legacy_keras(SCRIPT).stdout


def test_dann_model_fits_and_round_trips_under_legacy_tf_keras():
    assert "legacy keras DANN ok" in run_under_legacy_keras(DANN_SCRIPT).stdout


def test_legacy_keras_asked_for_without_tf_keras_is_a_clear_import_error():
    # None in sys.modules makes `import tf_keras` fail as if it were not
    # installed (as on a TensorFlow that no tf-keras exists for yet).
    code = "import sys; sys.modules['tf_keras'] = None; import grad_reverse"
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: grad_reverse: TF_USE_LEGACY_KERAS=1 asks for legacy Keras 2"), last
    assert 'pip install --no-deps "tf-keras==' in last and "unset TF_USE_LEGACY_KERAS" in last, last
