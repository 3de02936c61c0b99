"""Which `GradReverse` the package gives, by Keras' backend: on TensorFlow the
native op's layer keeps the name ".keras" files store, even when the JAX and
PyTorch layer's module is imported too."""

import keras
import pytest

import grad_reverse
from grad_reverse import backend_layer
from helpers.backends import BACKEND, needs_keras_3

pytestmark = needs_keras_3


@pytest.mark.skipif(BACKEND != "tensorflow", reason="the TensorFlow backend's choice (Keras runs on another here)")
def test_on_tensorflow_the_registered_layer_stays_the_native_ops():
    from grad_reverse import layer

    assert grad_reverse.GradReverse is layer.GradReverse
    assert keras.saving.get_registered_object("grad_reverse>GradReverse") is layer.GradReverse
    assert backend_layer.GradReverse is not layer.GradReverse


def test_the_backend_layer_names_the_backends_it_runs_on():
    with pytest.raises(ValueError, match="runs on Keras' jax or torch backend, not 'tensorflow'"):
        backend_layer.reverse_function("tensorflow")
