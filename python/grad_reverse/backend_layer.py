"""The gradient reversal layer on Keras 3's JAX and PyTorch backends: a
custom gradient native to each backend, with no TensorFlow and no compiled
code.

`grad_reverse.GradReverse` is this class when Keras runs on JAX or PyTorch
(on TensorFlow it is `grad_reverse.layer`'s, on the native op). Both are
registered as "grad_reverse>GradReverse" with the same config, so a `.keras`
file saved on one backend loads on the others.

The gradient follows the op's contract (`grad_reverse.reference`): lambda is
a float32; float32 and float64 gradients are multiplied by `-lambda` in their
own type, float16 and bfloat16 ones in float32 and rounded once; lambda
receives no gradient, at any order.

* JAX: `jax.custom_vjp`. The forward returns its input (JAX arrays are
  immutable: nothing is copied); lambda is a traced argument, so a
  `keras.Variable` lambda is part of the state Keras passes into its
  compiled step and is read at every step, without retracing.
* PyTorch: a `torch.autograd.Function` whose forward returns a view of the
  input (no copy); lambda's value at the forward is kept for the backward.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import keras

# What an error about lambda_ says is accepted.
LAMBDA_ACCEPTED = "a finite real number or a scalar float keras.Variable"
_HALF_NAMES = ("float16", "bfloat16")


def check_lambda(lambda_: Any) -> None:
    """Raises TypeError for a lambda_ the layer cannot take (None, a bool, a
    string, a tensor, an integer variable), ValueError for a non-finite
    number or a variable that is no scalar."""
    if isinstance(lambda_, keras.Variable):
        if tuple(lambda_.shape) != ():
            raise ValueError(f"lambda_ must be a scalar (shape []), got shape {list(lambda_.shape)}: {LAMBDA_ACCEPTED}")
        if "float" not in str(lambda_.dtype):
            raise TypeError(f"lambda_ must be {LAMBDA_ACCEPTED}, got a keras.Variable of dtype {lambda_.dtype}")
        return
    if isinstance(lambda_, bool) or not isinstance(lambda_, numbers.Real):
        raise TypeError(f"lambda_ must be {LAMBDA_ACCEPTED}, got {type(lambda_).__name__} {lambda_!r}")
    if not math.isfinite(float(lambda_)):
        raise ValueError(f"lambda_ must be finite, got {float(lambda_)}")


def _jax_reverse() -> Callable:
    import jax
    import jax.numpy as jnp

    @jax.custom_vjp
    def reverse(x, lambda_):
        return x

    def forward(x, lambda_):
        return x, lambda_

    def backward(lambda_, dy):
        scale = -jax.lax.stop_gradient(lambda_)
        if dy.dtype.name in _HALF_NAMES:
            dx = (dy.astype(jnp.float32) * scale).astype(dy.dtype)
        else:
            dx = dy * scale.astype(dy.dtype)
        return dx, jnp.zeros_like(lambda_)

    reverse.defvjp(forward, backward)

    def apply(x, lambda_):
        return reverse(x, jnp.asarray(lambda_, jnp.float32))

    return apply


def _torch_reverse() -> Callable:
    import torch

    class Reverse(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, lambda_):
            ctx.save_for_backward(lambda_)
            return x.view_as(x)

        @staticmethod
        def backward(ctx, dy):
            (lambda_,) = ctx.saved_tensors
            scale = -lambda_.to(dy.device)
            if dy.dtype in (torch.float16, torch.bfloat16):
                return (dy.float() * scale).to(dy.dtype), None
            return dy * scale.to(dy.dtype), None

    def apply(x, lambda_):
        if isinstance(lambda_, torch.Tensor):
            # A copy of the value read now: assigning the variable before the
            # backward runs changes neither this step's gradient nor autograd's
            # record (an in-place change to a saved tensor is an error there).
            lambda_ = lambda_.detach().to(torch.float32, copy=True)
        else:
            lambda_ = torch.tensor(lambda_, dtype=torch.float32, device=x.device)
        return Reverse.apply(x, lambda_)

    return apply


_REVERSES = {"jax": _jax_reverse, "torch": _torch_reverse}


def reverse_function(backend: str) -> Callable:
    """`f(x, lambda_)`: identity forward, `-lambda_ * dy` backward, on `backend`'s tensors."""
    try:
        make = _REVERSES[backend]
    except KeyError:
        raise ValueError(
            f"the JAX/PyTorch layer runs on Keras' jax or torch backend, not {backend!r} "
            "(on tensorflow, grad_reverse.GradReverse is the native op's layer)"
        ) from None
    return make()


class GradReverse(keras.layers.Layer):
    """Identity forward; multiplies the gradient by `-lambda_` on the way back.

    Args:
      lambda_: a finite real number, or a scalar float `keras.Variable` that
        a schedule assigns between steps (read at every step, no retracing;
        on JAX, a callback that assigns it inside an epoch of `fit` calls
        `model.jax_state_sync()` first, as for any variable). `get_config`
        stores its current value, so a reloaded layer holds a plain number.
        Anything else is a TypeError; a non-finite number or a non-scalar
        variable is a ValueError.

    With `training=False` (inference, `model.predict`) the layer returns its
    input. With `training=None` (a custom loop calling `model(x)`) the
    gradient is still reversed.
    """

    def __init__(self, lambda_: Any = 1.0, **kwargs: Any) -> None:
        if "lambda" in kwargs:  # `lambda` is a Python keyword: only **{"lambda": ...} gets here
            raise TypeError(
                f"GradReverse: the argument is lambda_ (with an underscore: lambda is a Python keyword), "
                f"got lambda={kwargs['lambda']!r}; pass GradReverse(lambda_=...) or GradReverse(...)"
            )
        super().__init__(**kwargs)
        check_lambda(lambda_)
        self.lambda_ = lambda_ if isinstance(lambda_, keras.Variable) else float(lambda_)
        self.supports_masking = True
        self._reverse = reverse_function(keras.backend.backend())

    def call(self, inputs, training: bool | None = None):
        if training is False:
            return inputs
        lambda_ = self.lambda_.value if isinstance(self.lambda_, keras.Variable) else self.lambda_
        return self._reverse(inputs, lambda_)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        lambda_ = self.lambda_
        if isinstance(lambda_, keras.Variable):
            lambda_ = keras.ops.convert_to_numpy(lambda_.value)
        config["lambda_"] = float(lambda_)
        return config


# On TensorFlow the registered name belongs to the native op's layer
# (`grad_reverse.layer`): importing this module there must not take it over.
if keras.backend.backend() != "tensorflow":
    GradReverse = keras.saving.register_keras_serializable(package="grad_reverse")(GradReverse)
