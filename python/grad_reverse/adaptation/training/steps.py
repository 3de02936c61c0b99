"""Where the backends differ in training an adversarial model, and nowhere else:

* how the objective's gradients are taken and the step is run: `training.tensorflow`
  (a GradientTape), `training.jax` (Keras' stateless step: `jax.value_and_grad`
  over the variables' values), `training.torch` (autograd's `backward()`);
* how `fit`'s batches are drawn: `tf.data` on TensorFlow (`batches`), a
  seeded `keras.utils.PyDataset` elsewhere (`array_batches`).

The objective itself (`AdversarialModel.objective`, each method's
`_adversarial_step`) is written once in `keras.ops` and is the same on all three;
so is what follows the gradients (`AdversarialModel.apply_gradients`,
`record_step`).
"""

from __future__ import annotations

from typing import Any

from grad_reverse.adaptation.training.batch_rules import FitData
from grad_reverse.backend_ops import BACKEND, ON_TENSORFLOW


def train_step(model: Any, *args: Any) -> Any:
    """The model's training step on this backend (`args`: `(data,)`, or on JAX `(state, data)`)."""
    if ON_TENSORFLOW:
        from grad_reverse.adaptation.training import tensorflow as step
    elif BACKEND == "jax":
        from grad_reverse.adaptation.training import jax as step
    elif BACKEND == "torch":
        from grad_reverse.adaptation.training import torch as step
    else:
        raise RuntimeError(
            f"{model.METHOD} trains on Keras' tensorflow, jax and torch backends; this process runs {BACKEND!r}"
        )
    return step.train_step(model, *args)


def state_carrier(model: Any) -> list:
    """On JAX, `[training.jax.StateCarrier]`: the schedule's counter and the parts' own optimizers ride
    among the metrics' variables, the state Keras passes through its compiled step. Elsewhere `[]`."""
    if BACKEND != "jax":
        return []
    from grad_reverse.adaptation.training.jax import carrier_of

    return [carrier_of(model)]


def fit_data(method: str, *args: Any) -> FitData:
    """`fit`'s batches (see `batches.fit_data`, `array_batches.fit_data`, which take the same arguments)."""
    if ON_TENSORFLOW:
        from grad_reverse.adaptation.training.batches import fit_data as make
    else:
        from grad_reverse.adaptation.training.array_batches import fit_data as make
    return make(method, *args)


def after_fit(model: Any) -> None:
    """What a fit leaves that the next fit must not meet: on JAX, `training.jax.separate_averages`
    (a second fit with `use_ema=True` fails in Keras otherwise). Elsewhere nothing."""
    if BACKEND == "jax":
        from grad_reverse.adaptation.training.jax import separate_averages

        separate_averages(model)
