"""`grad_reverse.GradReverse` on Keras' JAX and PyTorch backends: the op's
contract (identity forward, `-lambda * dy` bitwise in every dtype of the
backend, no gradient for lambda), a variable lambda read at every step of
`fit`, `training=False`, the config and `.keras` files, and what it refuses.

Runs where Keras runs on jax or torch (`helpers.backends`), skips elsewhere.
"""

from pathlib import Path

import keras
import numpy as np
import pytest

from helpers.backends import (
    BACKEND,
    DTYPES,
    ON_JAX_OR_TORCH,
    SKIP_REASON,
    bits,
    forward_backward,
    plain_reversed,
    precision,
    tensor,
    to_numpy,
)

if not ON_JAX_OR_TORCH:
    # Before the import below: on TensorFlow, `grad_reverse.GradReverse` is the native op's layer.
    pytest.skip(SKIP_REASON, allow_module_level=True)

import grad_reverse  # noqa: E402
from grad_reverse.backend_layer import GradReverse as BackendGradReverse  # noqa: E402

# Values whose products with 0.3 round differently in float16 than through
# float32, and a lambda that float32 cannot hold exactly: a backward that
# multiplies in the wrong type or skips lambda's float32 rounding differs here.
RNG = np.random.default_rng(46)
X = RNG.standard_normal(257) * 3.0
DY = RNG.standard_normal(257) * 5.0
LAMBDA = 0.3
# features (Dense 3) -> label; features -> GradReverse(0.25) -> domain, saved
# by Keras 3.15 on TensorFlow, with the native op's layer.
SAVED_ON_TENSORFLOW = Path(__file__).parent / "fixtures" / "saved_on_tensorflow.keras"


def test_the_package_gives_the_backend_layer():
    assert grad_reverse.GradReverse is BackendGradReverse
    assert keras.saving.get_registered_name(grad_reverse.GradReverse) == "grad_reverse>GradReverse"


@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_is_the_input_and_backward_is_minus_lambda_dy_bitwise(dtype):
    with precision(dtype):
        layer = grad_reverse.GradReverse(LAMBDA, dtype=dtype)
        x, dy = tensor(X, dtype), tensor(DY, dtype)
        y, dx = forward_backward(lambda v: layer(v, training=True), x, dy)
        assert str(y.dtype).endswith(dtype) and str(dx.dtype).endswith(dtype)
        np.testing.assert_array_equal(bits(to_numpy(y), dtype), bits(to_numpy(x), dtype))
        expected = plain_reversed(to_numpy(dy), LAMBDA, dtype)
        np.testing.assert_array_equal(bits(to_numpy(dx), dtype), bits(expected, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_forward_does_not_copy(dtype):
    with precision(dtype):
        layer = grad_reverse.GradReverse(LAMBDA, dtype=dtype)
        x = tensor(X, dtype)
        if BACKEND == "torch":
            x.requires_grad_(True)
            y = layer(x, training=True)
            assert y.data_ptr() == x.data_ptr() and y.grad_fn is not None
        else:
            assert layer(x, training=True) is x  # JAX arrays are immutable: the input itself


@pytest.mark.parametrize("policy, dtype", [("mixed_float16", "float16"), ("mixed_bfloat16", "bfloat16")])
def test_mixed_precision_reverses_in_the_compute_dtype(policy, dtype):
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        layer = grad_reverse.GradReverse(LAMBDA)
        y, dx = forward_backward(lambda v: layer(v), tensor(X, dtype), tensor(DY, dtype))
    finally:
        keras.config.set_dtype_policy(previous)
    assert str(y.dtype).endswith(dtype)
    np.testing.assert_array_equal(bits(to_numpy(dx), dtype), bits(plain_reversed(DY, LAMBDA, dtype), dtype))


def test_training_false_returns_the_input_and_its_gradient_is_not_reversed():
    layer = grad_reverse.GradReverse(2.0)
    x = tensor(X, "float32")
    y, dx = forward_backward(lambda v: layer(v, training=False), x, tensor(DY, "float32"))
    np.testing.assert_array_equal(to_numpy(dx), to_numpy(tensor(DY, "float32")))
    if BACKEND == "jax":
        assert layer(x, training=False) is x


def test_training_unset_still_reverses():
    layer = grad_reverse.GradReverse(2.0)
    _, dx = forward_backward(lambda v: layer(v), tensor([1.0, -1.0], "float32"), tensor([1.0, 1.0], "float32"))
    np.testing.assert_array_equal(to_numpy(dx), [-2.0, -2.0])


def test_lambda_gets_no_gradient_at_the_first_or_second_order():
    from grad_reverse.backend_layer import reverse_function

    reverse = reverse_function(BACKEND)
    if BACKEND == "jax":
        import jax
        import jax.numpy as jnp

        x = jnp.ones(3)
        first = jax.grad(lambda lam: jnp.sum(reverse(x, lam)))(0.5)
        second = jax.grad(lambda lam: jnp.sum(jax.grad(lambda v: jnp.sum(reverse(v, lam) * v))(x)))(0.5)
        assert float(first) == 0.0 and float(second) == 0.0
    else:
        import torch

        lam = torch.tensor(0.5, requires_grad=True)
        x = torch.ones(3, requires_grad=True)
        (dx,) = torch.autograd.grad(torch.sum(reverse(x, lam) * x), x, create_graph=True)
        assert dx.tolist() == [0.5, 0.5, 0.5]  # x's own path (1) plus the reversed one (-0.5)
        # Neither the forward nor the backward connects lambda to the graph.
        assert not dx.sum().requires_grad or torch.autograd.grad(dx.sum(), lam, allow_unused=True)[0] is None


def _sum_of_outputs(y_true, y_pred):
    return keras.ops.sum(y_pred)


def _one_weight_model(lambda_):
    """x -> w * x (w = 1) -> GradReverse: the loss sum(y) gives dL/dw = -lambda * sum(x)."""
    inputs = keras.Input((1,))
    scaled = keras.layers.Dense(1, use_bias=False, kernel_initializer="ones", name="w")(inputs)
    model = keras.Model(inputs, grad_reverse.GradReverse(lambda_)(scaled))
    model.compile(optimizer=keras.optimizers.SGD(1.0), loss=_sum_of_outputs)
    return model


def test_a_variable_lambda_is_read_at_every_step_of_fit():
    variable = keras.Variable(0.5, trainable=False, name="lambda")
    model = _one_weight_model(variable)
    x, y = np.ones((2, 1), "float32"), np.zeros((2, 1), "float32")
    values = {0: 0.5, 1: 2.0}

    class Schedule(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            sync = getattr(self.model, "jax_state_sync", None)  # see GradReverse's docstring
            if sync is not None:
                sync()
            variable.assign(values[batch])

    # Two steps of one point each, in one epoch: SGD(1) moves w by +lambda each step.
    model.fit(x, y, batch_size=1, epochs=1, shuffle=False, verbose=0, callbacks=[Schedule()])
    assert float(to_numpy(model.get_layer("w").kernel.value).item()) == 1.0 + 0.5 + 2.0
    # And between two fits, without a callback.
    variable.assign(0.25)
    model.fit(x[:1], y[:1], batch_size=1, epochs=1, verbose=0)
    assert float(to_numpy(model.get_layer("w").kernel.value).item()) == 3.5 + 0.25


def test_dann_lambda_schedule_reaches_every_step_of_fit():
    # On JAX an assignment inside an epoch that skips `jax_state_sync` is lost: w would not move.
    variable = keras.Variable(0.0, trainable=False, name="lambda")
    model = _one_weight_model(variable)
    schedule = grad_reverse.DANNLambdaSchedule(variable, lambda_max=2.0)
    x, y = np.ones((4, 1), "float32"), np.zeros((4, 1), "float32")
    model.fit(x, y, batch_size=1, epochs=1, shuffle=False, verbose=0, callbacks=[schedule])
    expected = 1.0 + sum(grad_reverse.dann_lambda(step / 3, 10.0, 2.0) for step in range(4))
    assert float(to_numpy(model.get_layer("w").kernel.value).item()) == pytest.approx(expected, rel=1e-5)


def test_get_config_round_trip_stores_a_variable_by_its_current_value():
    variable = keras.Variable(0.25, trainable=False)
    layer = grad_reverse.GradReverse(variable, name="grl")
    variable.assign(0.75)
    config = layer.get_config()
    assert config["lambda_"] == 0.75 and config["name"] == "grl"
    clone = grad_reverse.GradReverse.from_config(config)
    assert clone.lambda_ == 0.75 and clone.name == "grl"


def test_keras_file_loads_without_custom_objects(tmp_path):
    model = _one_weight_model(0.5)
    path = tmp_path / "grl.keras"
    model.save(path)
    loaded = keras.models.load_model(path, compile=False)
    layers = [layer for layer in loaded.layers if isinstance(layer, grad_reverse.GradReverse)]
    assert len(layers) == 1 and layers[0].lambda_ == 0.5
    x = tensor([[1.0], [2.0]], "float32")
    _, dx = forward_backward(lambda v: loaded(v, training=True), x, tensor([[1.0], [1.0]], "float32"))
    np.testing.assert_array_equal(to_numpy(dx), [[-0.5], [-0.5]])


@pytest.mark.parametrize(
    "lambda_, error, says",
    [
        (None, TypeError, "got NoneType None"),
        ("1.0", TypeError, "got str '1.0'"),
        (True, TypeError, "got bool True"),
        ([1.0], TypeError, "got list [1.0]"),
        (float("nan"), ValueError, "must be finite, got nan"),
        (float("inf"), ValueError, "must be finite, got inf"),
    ],
    ids=["none", "string", "bool", "list", "nan", "inf"],
)
def test_the_layer_refuses_a_lambda_of_the_wrong_kind(lambda_, error, says):
    with pytest.raises(error, match="lambda_ must be") as raised:
        grad_reverse.GradReverse(lambda_)
    assert says in str(raised.value)


def test_the_layer_refuses_a_variable_that_is_no_float_scalar():
    with pytest.raises(ValueError, match=r"must be a scalar \(shape \[\]\), got shape \[2\]"):
        grad_reverse.GradReverse(keras.Variable([0.5, 1.0]))
    with pytest.raises(TypeError, match="keras.Variable of dtype int32"):
        grad_reverse.GradReverse(keras.Variable(1, dtype="int32", trainable=False))


def test_a_keras_file_saved_on_tensorflow_loads_with_its_lambda_and_reverses_here():
    model = keras.models.load_model(SAVED_ON_TENSORFLOW)
    layer = model.get_layer("grad_reverse")
    assert type(layer) is BackendGradReverse and layer.lambda_ == 0.25
    domain = model.get_layer("domain")
    features = tensor(np.ones((1, 3)), "float32")
    _, dx = forward_backward(lambda h: domain(layer(h, training=True)), features, tensor([[1.0]], "float32"))
    kernel = to_numpy(domain.kernel.value).reshape(1, 3)
    np.testing.assert_array_equal(to_numpy(dx), -np.float32(0.25) * kernel)
