"""Saving a trained `grad_reverse.CDAN` (+E, randomized map) and `grad_reverse.MDD`:
the `.keras` round trip (predictions, weights, arguments, compile arguments,
training continues) and `export_serving` (a servable label predictor without
GradReverse, passing check-serving)."""

import io

import numpy as np
import pytest
import tensorflow as tf

from grad_reverse._keras import keras
from grad_reverse.adaptation import CDAN, MDD
from grad_reverse.serving import check_serving, export_serving
from helpers.models import graph_op_types


def points(seed: int = 0, n: int = 48) -> tuple:
    rng = np.random.default_rng(seed)
    x_source = rng.standard_normal((n, 2)).astype("float32")
    y_source = (x_source[:, 0] > 0).astype("int32") + (x_source[:, 1] > 0.5).astype("int32")
    x_target = (rng.standard_normal((n, 2)) + [1.0, -0.5]).astype("float32")
    return x_source, y_source, x_target


def cdan() -> CDAN:
    keras.utils.set_random_seed(0)
    feature_extractor = keras.Sequential([keras.Input((2,)), keras.layers.Dense(6, activation="tanh")])
    label_head = keras.Sequential([keras.Input((6,)), keras.layers.Dense(3, activation="softmax")])
    domain_head = keras.Sequential([keras.layers.Dense(4, activation="relu"), keras.layers.Dense(1)])  # unbuilt
    return CDAN(
        feature_extractor,
        label_head,
        domain_head,
        entropy_conditioning=True,
        randomized=True,
        randomized_dim=8,
        map_seed=3,
        map_gradient=True,
        lambda_max=0.7,
    )


def mdd() -> MDD:
    keras.utils.set_random_seed(0)
    feature_extractor = keras.Sequential([keras.Input((2,)), keras.layers.Dense(6, activation="tanh")])
    label_head = keras.Sequential([keras.Input((6,)), keras.layers.Dense(3)])  # logits
    return MDD(feature_extractor, label_head, margin=2.5, trade_off=0.5, warm_start_steps=10)


MAKERS = {"cdan": cdan, "mdd": mdd}
ARGUMENTS = {
    "cdan": ("entropy_conditioning", "randomized", "randomized_dim", "map_seed", "map_gradient", "lambda_max"),
    "mdd": ("margin", "trade_off", "warm_start_steps", "lambda_max", "gamma", "lambda_schedule"),
}
ADVERSARY = {"cdan": "domain_loss", "mdd": "transfer_loss"}


@pytest.fixture(scope="module", params=sorted(MAKERS))
def trained(request):
    model = MAKERS[request.param]()
    x_source, y_source, x_target = points()
    compile_kwargs = {"domain_loss_weight": 0.5} if request.param == "cdan" else {"label_from_logits": True}
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=request.param == "mdd")
    model.compile(keras.optimizers.Adam(0.01), loss, ["accuracy"], **compile_kwargs)
    model.fit(x_source, y_source, target=x_target, batch_size=16, epochs=2, seed=0, verbose=0)
    return request.param, model


def test_keras_file_round_trip_predicts_the_same_and_continues_training(trained, tmp_path):
    name, model = trained
    path = str(tmp_path / f"{name}.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert type(loaded) is type(model)
    assert [getattr(loaded, a) for a in ARGUMENTS[name]] == [getattr(model, a) for a in ARGUMENTS[name]]
    assert int(loaded.optimizer.iterations) == int(model.optimizer.iterations)
    x_source, y_source, x_target = points()
    np.testing.assert_array_equal(loaded.predict(x_target, verbose=0), model.predict(x_target, verbose=0))
    for a, b in zip(loaded.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)
    if name == "cdan":
        assert loaded._domain_loss_weight == 0.5
    else:
        assert loaded._label_from_logits is True
    # A new fit of a loaded, trained optimizer: the ramp restarts at 0, and the model says so.
    with pytest.warns(
        UserWarning, match="starts its lambda ramp and its batches at step 0, but the optimizer has taken 12"
    ):
        history = loaded.fit(x_source, y_source, target=x_target, batch_size=16, epochs=1, verbose=0)
    assert np.isfinite(history.history[ADVERSARY[name]]).all()
    assert any(not np.array_equal(a, b) for a, b in zip(loaded.get_weights(), model.get_weights()))


def test_export_serving_gives_a_label_predictor_without_grad_reverse(trained, tmp_path):
    _, model = trained
    path = str(tmp_path / "served")
    export_serving(model, path)
    out = io.StringIO()
    assert check_serving(path, out=out) == 0, out.getvalue()
    serve = tf.saved_model.load(path).signatures["serving_default"]
    assert "GradReverse" not in graph_op_types(serve)
    x_target = points()[2]
    (served,) = serve(tf.constant(x_target)).values()
    np.testing.assert_allclose(served.numpy(), model.predict(x_target, verbose=0), rtol=1e-5, atol=1e-6)
