"""Domain-adversarial training with `GradReverse` and Keras' own `fit`, on any
Keras 3 backend (TensorFlow, JAX, PyTorch): the recipe of
docs/keras-backends.md, on the moons of `demo.data`.

    KERAS_BACKEND=jax python -m grad_reverse.demo.any_backend --seeds 0 1 2 3 4

One functional model with two outputs: `label` (the class, from 15 sigmoid
features) and `domain` (source or target, from the same features behind
`GradReverse`). Each step is one full batch of every point, source and
target; the label loss is masked to the source points by `sample_weight`
(the target's labels are never seen), the domain loss covers all. Lambda is
a `keras.Variable` that a callback ramps up as in the paper (Ganin et al.
2016, eq. 14). The plain network is the same model, from the same weights on the
same batches, with the domain loss weighted 0.

Nothing here needs TensorFlow (nor does `grad_reverse.DANN` on JAX and
PyTorch): the data is numpy, the model plain Keras. Imports Keras when a function runs, so the module
itself is cheap to import.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from grad_reverse.demo.data import make_domains

HIDDEN_UNITS = 15
LEARNING_RATE = 0.01
LAMBDA_MAX = 1.0
GAMMA = 10.0
DEFAULT_STEPS = 1000
DEFAULT_SEEDS = (0, 1, 2, 3, 4)


class Result(NamedTuple):
    seed: int
    plain: float  # target accuracy
    dann: float
    source_dann: float  # DANN's accuracy on the source, which it must still fit
    seconds: float


def ramp(progress: float, lambda_max: float = LAMBDA_MAX, gamma: float = GAMMA) -> float:
    """The paper's schedule: 0 at the start, `lambda_max` at the end."""
    return lambda_max * (2.0 / (1.0 + math.exp(-gamma * progress)) - 1.0)


def build_model(seed: int, lambda_: Any) -> Any:
    """x -> 15 sigmoid features -> `label`; features -> GradReverse(lambda_) -> `domain`."""
    import keras

    from grad_reverse import GradReverse

    keras.utils.set_random_seed(seed)  # the same initial weights for both models of a seed
    inputs = keras.Input((2,), name="x")
    features = keras.layers.Dense(HIDDEN_UNITS, activation="sigmoid", name="features")(inputs)
    label = keras.layers.Dense(1, activation="sigmoid", name="label")(features)
    reversed_features = GradReverse(lambda_, name="grad_reverse")(features)
    domain = keras.layers.Dense(1, activation="sigmoid", name="domain")(reversed_features)
    return keras.Model(inputs, {"label": label, "domain": domain})


def training_data(seed: int) -> tuple:
    """`(x, y, sample_weight, (x_target, y_target))` of one full batch.

    The label's weight is 0 on target points and `points / source points` on
    source ones, so that the masked mean Keras takes over the batch is the
    mean over the source.
    """
    d = make_domains(seed)
    x = np.concatenate([d.x_source, d.x_target])
    n_source, n = len(d.x_source), len(d.x_source) + len(d.x_target)
    is_target = (np.arange(n) >= n_source).astype("float32").reshape(-1, 1)
    label = np.concatenate([d.y_source, np.zeros(len(d.x_target), "float32")]).reshape(-1, 1)
    y = {"label": label, "domain": is_target}
    weights = {"label": (1.0 - is_target).reshape(-1) * (n / n_source), "domain": np.ones(n, "float32")}
    return x, y, weights, (d.x_target, d.y_target)


def _lambda_schedule(variable: Any, steps: int) -> Any:
    import keras

    class LambdaRamp(keras.callbacks.Callback):
        """Assigns `ramp(step / steps)` to lambda before each step."""

        def on_train_batch_begin(self, batch, logs=None):
            # Keras' JAX trainer keeps the variables' values outside them
            # inside an epoch; syncing puts them back, so that this assignment
            # is what the next step reads.
            sync = getattr(self.model, "jax_state_sync", None)
            if sync is not None:
                sync()
            variable.assign(ramp(batch / steps))

    return LambdaRamp()


def train(seed: int, steps: int = DEFAULT_STEPS, domain_weight: float = 1.0) -> Any:
    """The model of `seed` after `steps` full-batch Adam steps; `domain_weight` 0 is the plain network."""
    import keras

    lambda_ = keras.Variable(0.0, trainable=False, name="lambda")
    model = build_model(seed, lambda_)
    model.compile(
        optimizer=keras.optimizers.Adam(LEARNING_RATE),
        loss={"label": "binary_crossentropy", "domain": "binary_crossentropy"},
        loss_weights={"label": 1.0, "domain": domain_weight},
    )
    x, y, weights, _ = training_data(seed)
    # One epoch of `steps` copies of the full batch: the schedule's callback
    # sees every step, and Keras' per-epoch work runs once.
    repeat = lambda a: np.concatenate([a] * steps)  # noqa: E731
    model.fit(
        repeat(x),
        {k: repeat(v) for k, v in y.items()},
        sample_weight={k: repeat(v) for k, v in weights.items()},
        batch_size=len(x),
        epochs=1,
        shuffle=False,
        verbose=0,
        callbacks=[_lambda_schedule(lambda_, steps)],
    )
    return model


def accuracy(model: Any, x: np.ndarray, y: np.ndarray) -> float:
    """Fraction of points whose label output (P > 0.5) equals `y`."""
    import keras

    p = keras.ops.convert_to_numpy(model(x, training=False)["label"]).reshape(-1)
    return float(np.mean((p > 0.5) == (np.asarray(y).reshape(-1) > 0.5)))


def run_seed(seed: int, steps: int = DEFAULT_STEPS) -> Result:
    """The plain network and DANN of one seed: target accuracies, and DANN's on the source."""
    start = time.perf_counter()
    _, _, _, (x_target, y_target) = training_data(seed)
    plain = train(seed, steps, domain_weight=0.0)
    dann = train(seed, steps)
    d = make_domains(seed)
    return Result(
        seed,
        accuracy(plain, x_target, y_target),
        accuracy(dann, x_target, y_target),
        accuracy(dann, d.x_source, d.y_source),
        time.perf_counter() - start,
    )


def table(results: Sequence[Result]) -> str:
    """A Markdown table: one row per seed and the means."""
    lines = ["| seed | plain (target) | DANN (target) | DANN (source) | seconds |", "|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.seed} | {r.plain:.3f} | {r.dann:.3f} | {r.source_dann:.3f} | {r.seconds:.1f} |")
    mean = lambda i: float(np.mean([r[i] for r in results]))  # noqa: E731
    lines.append(f"| mean | {mean(1):.3f} | {mean(2):.3f} | {mean(3):.3f} | {mean(4):.1f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grad_reverse.demo.any_backend",
        description="DANN with GradReverse and Keras' fit on the moons, on the Keras backend KERAS_BACKEND names; "
        "exits 1 when DANN's mean target accuracy is not above the plain network's.",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=list(DEFAULT_SEEDS))
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    import keras

    results = [run_seed(seed, args.steps) for seed in args.seeds]
    print(f"Keras {keras.__version__} on {keras.backend.backend()}, {args.steps} steps")
    print(table(results))
    return 0 if np.mean([r.dann for r in results]) > np.mean([r.plain for r in results]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
