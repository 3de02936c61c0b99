"""The gradient reversal Keras layer, on the Keras that `tf.keras` is here
(Keras 3; Keras 2 on TensorFlow 2.15 or with TF_USE_LEGACY_KERAS=1), so it
fits into whichever Keras the rest of the model is built with."""

from __future__ import annotations

import numbers
from types import ModuleType
from typing import Any

import numpy as np
import tensorflow as tf

from grad_reverse._keras import keras
from grad_reverse.ops import LAMBDA_ACCEPTED, InvalidLambdaError, LambdaLike, grad_reverse


def check_lambda_kind(lambda_: LambdaLike) -> None:
    """Raises TypeError for a lambda_ the op cannot take (None, a bool, a
    string, an object that is no number), InvalidLambdaError (a ValueError, as
    `grad_reverse()` raises) for one whose shape is known now and is not a
    scalar (a list, an array, a tensor or variable of rank 1 or more)."""
    if lambda_ is None or isinstance(lambda_, (bool, np.bool_, str, bytes)):
        raise TypeError(f"lambda_ must be {LAMBDA_ACCEPTED}, got {lambda_!r}")
    shape = getattr(lambda_, "shape", None)
    if shape is None and isinstance(lambda_, (list, tuple)):
        shape = np.shape(lambda_)
    if shape is None:
        if not isinstance(lambda_, numbers.Real):
            raise TypeError(f"lambda_ must be {LAMBDA_ACCEPTED}, got {type(lambda_).__name__} {lambda_!r}")
        return
    shape = tf.TensorShape(shape)
    if shape.rank is not None and shape.rank != 0:
        raise InvalidLambdaError(
            None, None, f"lambda_ must be a scalar (shape []), got shape {shape.as_list()}: {LAMBDA_ACCEPTED}"
        )


def check_finite_lambda(lambda_: LambdaLike) -> None:
    """Raises InvalidLambdaError (a ValueError) for a non-finite lambda whose value is known now: a
    number or an eager tensor. A variable's value is read by the op at every
    step instead (it changes), which XLA cannot check (see README)."""
    if isinstance(lambda_, numbers.Real) and not isinstance(lambda_, (bool, np.bool_)):
        value = float(lambda_)
    elif isinstance(lambda_, tf.Tensor) and hasattr(lambda_, "numpy"):  # an eager tensor
        value = lambda_.numpy()
    else:
        return
    if not np.all(np.isfinite(value)):
        raise InvalidLambdaError(None, None, f"lambda_ must be finite, got {value}")


def make_layer_class(keras: ModuleType) -> type:
    """The layer class on top of `keras`.

    Args:
      keras: the Keras module the layer builds on: `keras` or `tf_keras`.
    """

    @keras.saving.register_keras_serializable(package="grad_reverse")
    class GradReverse(keras.layers.Layer):
        """Identity forward; multiplies the gradient by `-lambda_` on the way back.

        Args:
          lambda_: a finite number, a real scalar tensor (cast to float32), or a scalar
            `tf.Variable` / `keras.Variable` that a schedule assigns between
            steps (no retracing). `get_config` stores its current value, so a
            reloaded layer holds a plain number. Checked here: anything else
            (None, a string) is a TypeError; a non-scalar (a list, an array)
            and a non-finite number or eager tensor are an InvalidLambdaError (a
            ValueError and a tf.errors.InvalidArgumentError, as `grad_reverse()` raises), since
            under XLA a captured tensor's value cannot be checked at run time.

        With `training=False` (inference, `model.predict`) the layer returns
        its input without the op. With `training=None` (a custom loop calling
        `model(x)`), the gradient is still reversed. So `model.export` and
        `tf.saved_model.save`, which trace the model with `training` unset,
        keep the op; `grad_reverse.serving.export_serving` calls the model
        with `training=False` and writes an export of stock TensorFlow ops
        only (and `make-servable` removes the op from any SavedModel).
        """

        def __init__(self, lambda_: LambdaLike = 1.0, **kwargs: Any) -> None:
            if "lambda" in kwargs:  # `lambda` is a Python keyword: only **{"lambda": ...} gets here
                raise TypeError(
                    f"GradReverse: the argument is lambda_ (with an underscore: lambda is a Python keyword), "
                    f"got lambda={kwargs['lambda']!r}; pass GradReverse(lambda_=...) or GradReverse(...)"
                )
            super().__init__(**kwargs)
            check_lambda_kind(lambda_)
            check_finite_lambda(lambda_)
            self.lambda_ = lambda_
            self.supports_masking = True

        def call(self, inputs, training: bool | None = None):
            if training is False:
                return inputs
            return grad_reverse(inputs, self.lambda_)

        def compute_output_shape(self, input_shape):
            return input_shape

        def get_config(self) -> dict[str, Any]:
            config = super().get_config()
            lambda_ = self.lambda_
            config["lambda_"] = float(lambda_.numpy() if hasattr(lambda_, "numpy") else lambda_)
            return config

    return GradReverse


GradReverse = make_layer_class(keras)
