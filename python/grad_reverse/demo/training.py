"""Training the two networks of the moons demo with Keras `fit`.

The plain network: all 300 labeled source points every step (full batches, so
the baseline fits the source on every seed; smaller batches can stall it at
a nearly linear boundary, which would flatter DANN).

DANN: `grad_reverse.DANN`, batches of 150 labeled source + 150 unlabeled
target points; the class computes the label loss on the source half only
and the domain loss on both.

Lambda: the paper's schedule `lambda_p = 6 * (2 / (1 + exp(-10 p)) - 1)`
(`DANN(lambda_max=6, gamma=10)`, computed in every step), i.e.
the paper's lambda = 6 reached through its ramp, with the paper's objective
(`DANN`'s default: domain loss = source mean + target mean); the ramp fails
less badly on its worst seeds than a constant 6.

Optimizer: Adam, learning rate 0.01, 3000 steps, keeping an exponential
moving average of the weights (momentum 0.99) that becomes the final model:
the adversarial game does not settle, and the average is a steadier
endpoint than the raw weights. The paper's own recipe (per-example SGD,
learning rate 0.05, 500 epochs, lambda 6 from the start) leaves even the
source half-learned on these data.

docs/demo.md ("Why the demo trains as it does") has the measurements behind
each choice.

Keras 2.15 and Keras 3 both: `Adam(use_ema=...)` (Keras 2.11+),
`set_random_seed`, `fit` on a `tf.data.Dataset`.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from grad_reverse._keras import keras
from grad_reverse.adaptation import DANN
from grad_reverse.demo.data import MoonsDomains
from grad_reverse.demo.models import build_dann, build_plain
from grad_reverse.demo.progress import fit_progress

BATCH_PER_DOMAIN = 150
LEARNING_RATE = 0.01
EMA_MOMENTUM = 0.99
LAMBDA_MAX = 6.0
GAMMA = 10.0


def optimizer() -> keras.optimizers.Optimizer:
    """The demo's optimizer (the experiments train with it too). The EMA
    weights replace the raw ones at the end of fit: see the module docstring
    for why."""
    return keras.optimizers.Adam(LEARNING_RATE, use_ema=True, ema_momentum=EMA_MOMENTUM)


def _full_source_batches(domains: MoonsDomains) -> tf.data.Dataset:
    """Every step sees all labeled source points."""
    return tf.data.Dataset.from_tensors((domains.x_source, domains.y_source)).repeat()


def train_plain(domains: MoonsDomains, seed: int, steps: int, quiet: bool = True) -> keras.Model:
    """The plain network, trained on the labeled source points only."""
    model = build_plain(seed)
    model.compile(optimizer=optimizer(), loss="binary_crossentropy", metrics=["accuracy"])
    verbose, callbacks = fit_progress("fit", steps, quiet)
    # shuffle=False: the datasets make their own batches; Keras warns about shuffle=True.
    model.fit(
        _full_source_batches(domains),
        epochs=1,
        steps_per_epoch=steps,
        shuffle=False,
        verbose=verbose,
        callbacks=callbacks,
    )
    return model


def train_dann(
    domains: MoonsDomains,
    seed: int,
    steps: int,
    quiet: bool = True,
    lambda_max: float = LAMBDA_MAX,
    **compile_kwargs: Any,
) -> DANN:
    """DANN with the paper's lambda schedule up to `lambda_max`; `compile_kwargs`:
    DANN.compile's domain arguments (e.g. `domain_loss_reduction`)."""
    model = build_dann(seed, lambda_max=lambda_max, gamma=GAMMA)
    model.compile(optimizer=optimizer(), loss="binary_crossentropy", metrics=["accuracy"], **compile_kwargs)
    verbose, callbacks = fit_progress("fit", steps, quiet)
    model.fit(
        domains.x_source,
        domains.y_source,
        target=domains.x_target,
        batch_size=2 * BATCH_PER_DOMAIN,
        epochs=1,
        steps_per_epoch=steps,
        seed=seed,
        verbose=verbose,
        callbacks=callbacks,
    )
    return model
