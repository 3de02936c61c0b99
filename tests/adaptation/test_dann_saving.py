"""Saving a trained `grad_reverse.DANN`: the `.keras` round trip (Keras 3,
and Keras 2 on TensorFlow 2.15 / tf-keras: its save path for this class),
and `export_serving`: a servable label predictor without GradReverse."""

import io

import numpy as np
import pytest
import tensorflow as tf

from grad_reverse._keras import keras
from grad_reverse.adaptation import DANN, DANNLearningRateSchedule
from grad_reverse.serving import check_serving, export_serving
from helpers.models import dann, domains, graph_op_types


@pytest.fixture(scope="module")
def trained():
    x_source, y_source, x_target = domains()
    model = dann(lambda_max=0.8, gamma=5.0)
    schedule = DANNLearningRateSchedule(0.05, decay_steps=12)
    model.compile(keras.optimizers.Adam(schedule), "binary_crossentropy", ["accuracy"], domain_loss_weight=0.5)
    model.fit(x_source, y_source, target=x_target, batch_size=32, epochs=2, seed=0, verbose=0)
    return model


def assert_same_model(loaded, model):
    x_source, y_source, x_target = domains()
    assert isinstance(loaded, DANN)
    assert (loaded.lambda_max, loaded.gamma, loaded.lambda_schedule) == (0.8, 5.0, "paper")
    np.testing.assert_array_equal(loaded.predict(x_target, verbose=0), model.predict(x_target, verbose=0))
    for a, b in zip(loaded.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)
    # It can continue training, with the restored compile arguments.
    assert loaded._domain_loss_weight == 0.5
    # A new fit of a loaded, trained optimizer: the ramp restarts at 0, and the model says so.
    with pytest.warns(
        UserWarning, match="starts its lambda ramp and its batches at step 0, but the optimizer has taken"
    ):
        history = loaded.fit(x_source, y_source, target=x_target, batch_size=32, epochs=1, verbose=0)
    assert np.isfinite(history.history["domain_loss"]).all()
    assert any(not np.array_equal(a, b) for a, b in zip(loaded.get_weights(), model.get_weights()))


def test_keras_file_round_trip_predicts_the_same_and_continues_training(trained, tmp_path):
    path = str(tmp_path / "dann.keras")
    trained.save(path)
    loaded = keras.models.load_model(path)
    assert int(loaded.optimizer.iterations) == int(trained.optimizer.iterations)  # optimizer state restored
    assert_same_model(loaded, trained)


def test_export_serving_gives_a_label_predictor_without_grad_reverse(trained, tmp_path):
    path = str(tmp_path / "served")
    export_serving(trained, path)
    out = io.StringIO()
    assert check_serving(path, out=out) == 0, out.getvalue()
    serve = tf.saved_model.load(path).signatures["serving_default"]
    assert "GradReverse" not in graph_op_types(serve)
    x_target = domains()[2]
    (served,) = serve(tf.constant(x_target)).values()
    np.testing.assert_allclose(served.numpy(), trained.predict(x_target, verbose=0), rtol=1e-6)
