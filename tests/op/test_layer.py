"""The Keras 3 layer: config, serialization, training flag, DANN-style fit,
mixed precision."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import grad_reverse
from grad_reverse import reference
from helpers.models import batch, dann_model
from helpers.tensors import assert_bitwise_equal


class ReferenceGRL(keras.layers.Layer):
    """The pure-Python layer users write today, as the oracle."""

    def __init__(self, lambda_=1.0, **kwargs):
        super().__init__(**kwargs)
        self.lambda_ = lambda_

    def call(self, inputs, training=None):
        return reference.grad_reverse(inputs, self.lambda_)


def feature_gradients(model, x, y, training=True):
    loss_fn = keras.losses.BinaryCrossentropy()
    with tf.GradientTape() as tape:
        out = model(x, training=training)
        loss = loss_fn(y["label"], out["label"]) + loss_fn(y["domain"], out["domain"])
    return tape.gradient(loss, model.get_layer("features").trainable_weights)


def test_get_config_round_trip():
    layer = grad_reverse.GradReverse(lambda_=0.3, name="grl")
    clone = grad_reverse.GradReverse.from_config(layer.get_config())
    assert clone.lambda_ == pytest.approx(0.3) and clone.name == "grl"


def test_get_config_of_variable_lambda_stores_its_current_value():
    variable = tf.Variable(0.25)
    layer = grad_reverse.GradReverse(lambda_=variable)
    variable.assign(0.75)
    assert layer.get_config()["lambda_"] == 0.75


def test_keras_file_loads_without_custom_objects(tmp_path):
    model = dann_model(grad_reverse.GradReverse(lambda_=0.5))
    path = tmp_path / "dann.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    grl = [layer for layer in loaded.layers if isinstance(layer, grad_reverse.GradReverse)]
    assert len(grl) == 1 and grl[0].lambda_ == 0.5
    x, y = batch()
    for a, b in zip(feature_gradients(model, x, y), feature_gradients(loaded, x, y)):
        assert_bitwise_equal(a, b)


def test_training_false_returns_the_input_without_the_op():
    layer = grad_reverse.GradReverse()

    @tf.function
    def infer(x):
        return layer(x, training=False)

    graph = infer.get_concrete_function(tf.TensorSpec([None, 3])).graph
    assert "GradReverse" not in {op.type for op in graph.get_operations()}

    @tf.function
    def default(x):
        return layer(x)

    graph = default.get_concrete_function(tf.TensorSpec([None, 3])).graph
    assert "GradReverse" in {op.type for op in graph.get_operations()}


def test_custom_loop_without_training_flag_still_reverses():
    layer = grad_reverse.GradReverse(lambda_=2.0)
    x = tf.ones([2])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x)
    assert_bitwise_equal(tape.gradient(y, x), [-2.0, -2.0])


def test_dann_feature_gradients_equal_the_reference_and_differ_without_reversal():
    x, y = batch()
    native = feature_gradients(dann_model(grad_reverse.GradReverse(lambda_=0.7)), x, y)
    ref = feature_gradients(dann_model(ReferenceGRL(lambda_=0.7)), x, y)
    plain = feature_gradients(dann_model(keras.layers.Identity()), x, y)
    for a, b in zip(native, ref):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)
    assert not np.allclose(native[0].numpy(), plain[0].numpy())


def test_dann_fit_runs_and_reverses_the_domain_gradient():
    x, y = batch(256)
    model = dann_model(grad_reverse.GradReverse(lambda_=1.0))
    plain = dann_model(keras.layers.Identity())  # the same model without reversal
    plain.set_weights(model.get_weights())
    features_before = model.get_layer("features").get_weights()
    # One full-batch SGD step on the domain loss alone: the feature extractor
    # must move *up* the plain domain gradient (it learns to confuse the domain
    # head), where a model without reversal moves down it.
    with tf.GradientTape() as tape:
        domain_loss = keras.losses.BinaryCrossentropy()(y["domain"], plain(x, training=True)["domain"])
    plain_gradients = tape.gradient(domain_loss, plain.get_layer("features").trainable_weights)
    model.compile(
        optimizer=keras.optimizers.SGD(0.1),
        loss_weights={"label": 0.0, "domain": 1.0},
        loss={"label": "binary_crossentropy", "domain": "binary_crossentropy"},
    )
    model.fit(x, y, batch_size=256, epochs=1, shuffle=False, verbose=0)
    for before, after, plain_gradient in zip(
        features_before, model.get_layer("features").get_weights(), plain_gradients
    ):
        np.testing.assert_allclose(after - before, 0.1 * plain_gradient.numpy(), rtol=1e-3, atol=1e-6)
    assert np.abs(plain_gradients[0].numpy()).max() > 1e-3  # a step that can show its sign

    # And a DANN fit on both losses learns the label task.
    model.compile(
        optimizer=keras.optimizers.Adam(0.01), loss={"label": "binary_crossentropy", "domain": "binary_crossentropy"}
    )
    history = model.fit(x, y, batch_size=64, epochs=3, verbose=0)
    assert all(np.isfinite(v).all() for v in history.history.values())
    assert history.history["label_loss"][-1] < history.history["label_loss"][0]


@pytest.mark.parametrize("policy,dtype", [("mixed_float16", tf.float16), ("mixed_bfloat16", tf.bfloat16)])
def test_mixed_precision_follows_the_compute_dtype(policy, dtype):
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(policy)
    try:
        layer = grad_reverse.GradReverse(lambda_=0.5)
        ref_layer = ReferenceGRL(lambda_=0.5)
        x = tf.constant(np.linspace(-3, 3, 12, dtype="float32").reshape(3, 4))
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = layer(x)
            y_ref = ref_layer(x)
            loss = tf.reduce_sum(tf.cast(y, tf.float32) ** 2)
            loss_ref = tf.reduce_sum(tf.cast(y_ref, tf.float32) ** 2)
        assert y.dtype == dtype and y_ref.dtype == dtype
        assert_bitwise_equal(y, y_ref)
        assert_bitwise_equal(tape.gradient(loss, x), tape.gradient(loss_ref, x))

        model = dann_model(grad_reverse.GradReverse(lambda_=0.5))
        grl_output = [layer for layer in model.layers if isinstance(layer, grad_reverse.GradReverse)][0].output
        assert grl_output.dtype == dtype.name
        model.compile(optimizer="adam", loss="binary_crossentropy")
        xb, yb = batch(64)
        history = model.fit(xb, yb, batch_size=32, epochs=1, verbose=0)
        assert np.isfinite(history.history["loss"]).all()
    finally:
        keras.mixed_precision.set_global_policy(previous)


def test_layer_is_registered_under_the_name_keras_files_store():
    # Saved .keras files name the class this way: renaming it breaks loading them.
    assert keras.saving.get_registered_name(grad_reverse.GradReverse) == "grad_reverse>GradReverse"


def test_a_variable_lambda_is_checked_by_the_op_at_each_step_not_at_construction():
    variable = tf.Variable(float("nan"))
    layer = grad_reverse.GradReverse(lambda_=variable)  # a schedule assigns it before the first step
    variable.assign(0.5)
    x = tf.ones([2])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True)
    assert_bitwise_equal(tape.gradient(y, x), [-0.5, -0.5])


def test_the_mask_passes_through_the_layer():
    x = tf.constant([[[1.0, 2.0], [0.0, 0.0], [3.0, 0.5]]])
    masked = keras.layers.Masking(0.0)(x)
    out = grad_reverse.GradReverse()(masked, training=True)
    assert getattr(out, "_keras_mask", None) is not None, "the layer dropped the mask"
    assert out._keras_mask.numpy().tolist() == [[True, False, True]]


@pytest.mark.parametrize(
    "lambda_, error, says",
    [
        (None, TypeError, "got None"),
        ("1.0", TypeError, "got '1.0'"),
        ([1.0, 2.0], ValueError, "must be a scalar (shape []), got shape [2]"),
        (np.array([0.5]), ValueError, "must be a scalar (shape []), got shape [1]"),
        (tf.constant([[1.0]]), ValueError, "must be a scalar (shape []), got shape [1, 1]"),
    ],
    ids=["none", "string", "list", "array", "tensor"],
)
def test_the_layer_refuses_a_lambda_of_the_wrong_kind_or_shape_at_construction(lambda_, error, says):
    with pytest.raises(error) as raised:
        grad_reverse.GradReverse(lambda_=lambda_)
    message = str(raised.value)
    assert message.startswith("lambda_ must be") and says in message
    assert "a real number, a float scalar tensor or a scalar tf.Variable" in message


@pytest.mark.parametrize(
    "make_lambda",
    [
        lambda: 0.5,
        lambda: 2,
        lambda: np.float32(0.5),
        lambda: tf.constant(0.5),
        lambda: tf.Variable(0.5),
        # keras.Variable is Keras 3's; TensorFlow 2.15 ships Keras 2, which has none.
        pytest.param(
            lambda: keras.Variable(0.5),
            marks=pytest.mark.skipif(not hasattr(keras, "Variable"), reason="Keras 2 has no keras.Variable"),
        ),
    ],
    ids=["float", "int", "numpy", "tensor", "tf.Variable", "keras.Variable"],
)
def test_the_layer_accepts_numbers_scalar_tensors_and_variables(make_lambda):
    layer = grad_reverse.GradReverse(lambda_=make_lambda())
    assert layer(tf.ones([2])).shape == [2]


def test_the_docstring_says_model_export_keeps_the_op_and_export_serving_leaves_it_out():
    doc = " ".join(grad_reverse.GradReverse.__doc__.split())
    assert "(inference, `model.predict`)" in doc and "`model.export`)" not in doc
    assert "`model.export` and `tf.saved_model.save`, which trace the model with `training` unset, keep the op" in doc
    assert "`grad_reverse.serving.export_serving` calls the model with `training=False`" in doc


@pytest.mark.parametrize(
    "bad, says",
    [([1.0, 2.0], "must be a scalar"), (np.array([0.5]), "must be a scalar"), (float("nan"), "must be finite")],
    ids=["list", "array", "nan"],
)
def test_a_vector_or_non_finite_lambda_is_one_error_type_from_the_function_and_the_layer(bad, says):
    # One mistake, one type: a ValueError (as Keras layers raise) that is also
    # the InvalidArgumentError the op raises for a lambda known only at run time.
    with pytest.raises(ValueError, match=says) as from_function:
        grad_reverse.grad_reverse(tf.ones([2, 3]), bad)
    with pytest.raises(ValueError, match=says) as from_layer:
        grad_reverse.GradReverse(lambda_=bad)(tf.ones([2, 3]))
    assert type(from_function.value) is type(from_layer.value)
    assert isinstance(from_layer.value, tf.errors.InvalidArgumentError)
