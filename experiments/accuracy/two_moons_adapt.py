"""ADAPT's "Two moons" example (adapt-python/adapt, the docs' Two_moons notebook), trained with
this package's methods at their defaults, and optionally with ADAPT's own: the numbers behind
docs/methods.md's "On a peer's own problem" table.

    python experiments/accuracy/two_moons_adapt.py [--seeds 0-9] [--methods dann,cdan_e,...]
        [--adapt] [--epochs 800]

The problem, as the notebook builds it: scikit-learn's `make_moons(100, noise=0.05,
random_state=0)`, shifted by -0.5 along x, is the labeled source; the same points turned by
30 degrees are the unlabeled target, and accuracy is measured on them (with their labels).
The networks are the notebook's: feature extractor Dense(10, relu) (ADAPT's default encoder),
label head Dense(10, relu), Dense(10, relu), then Dense(1, sigmoid) with binary cross-entropy
(source-only, DANN, MDD) or Dense(2, softmax) with categorical cross-entropy (CDAN, CDAN+E),
domain head Dense(10, relu), Dense(10, relu), Dense(1, sigmoid) (ADAPT's default
discriminator). Adam(0.001, beta_1=0.5); batches of 34 source and 34 target points, 3 per
epoch, 800 epochs (2,400 steps).

Ours (`dann`, `cdan`, `cdan_e`, `mdd`) are built with the constructors' and `compile`'s
defaults: what a user gets without tuning. `source_only` is the plain network trained on the
source batches. `dann_constant`, `cdan_constant`, `cdan_e_constant` are the same with the
one-argument switch `lambda_schedule="constant"` (lambda 1 from the first step, as ADAPT's
notebook runs its DANN and CDAN); `cdan_sum`, `cdan_e_sum` with
`compile(domain_loss_reduction="sum_over_domains")` (the DANN paper's sum of the two
domains' means, twice CDAN's authors' term); `cdan_map_gradient`, `cdan_e_map_gradient` with
`CDAN(map_gradient=True)` (the map's class probabilities differentiated, as ADAPT's CDAN: the
default since these were measured, so today the same as `cdan`, `cdan_e`); `cdan_detached_map`,
`cdan_e_detached_map` with `CDAN(map_gradient=False)` (the authors' code, the default when
docs/methods.md's tables were measured: their "defaults" rows);
`mdd_constant` with `lambda_schedule="constant"` (lambda 0.1 throughout, as ADAPT's MDD).
The seed sets the weights' initialisation and the batch order (`keras.utils.set_random_seed`,
`fit(seed=)`); the data is the notebook's for every seed.

With `--adapt`, also ADAPT 0.4.5's own methods on the same data and seeds, as the notebook
calls them (`random_state=seed`): `adapt_source_only` (its DANN with `lambda_=0`, the
notebook's source-only), `adapt_dann` (`lambda_=1`, the notebook's), `adapt_cdan_e`
(`entropy=True`, the notebook's), `adapt_cdan` (`entropy=False`), `adapt_mdd` (its defaults).
ADAPT is not a dependency of this project: install it beside TensorFlow with
`pip install --no-deps adapt==0.4.5 scikit-learn scikeras cvxopt`.

Needs scikit-learn (`pip install scikit-learn`) for the data. TensorFlow runs on one thread
(reproducible per machine). One line per seed, then each method's target accuracy min / mean
/ max over the seeds.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from dann_moons_seeds import seed_range  # noqa: E402

from grad_reverse import CDAN, DANN, MDD  # noqa: E402
from grad_reverse._tools import keras  # noqa: E402

EPOCHS = 800
BATCH_PER_DOMAIN = 34
STEPS_PER_EPOCH = 3  # ceil(100 / 34): ADAPT completes the last batch, so do we
OURS = ("source_only", "dann", "cdan", "cdan_e", "mdd")
# One-argument switches away from the defaults: (constructor arguments, compile arguments).
SWITCHES = {
    "_constant": ({"lambda_schedule": "constant"}, {}),
    "_sum": ({}, {"domain_loss_reduction": "sum_over_domains"}),
    "_map_gradient": ({"map_gradient": True}, {}),
    "_detached_map": ({"map_gradient": False}, {}),
}
OURS_SWITCHED = (
    "dann_constant",
    "cdan_constant",
    "cdan_e_constant",
    "cdan_sum",
    "cdan_e_sum",
    "cdan_map_gradient",
    "cdan_e_map_gradient",
    "cdan_detached_map",
    "cdan_e_detached_map",
    "mdd_constant",
)
ADAPT = ("adapt_source_only", "adapt_dann", "adapt_cdan", "adapt_cdan_e", "adapt_mdd")
ADAPT_INSTALL = "pip install --no-deps adapt==0.4.5 scikit-learn scikeras cvxopt"


def make_moons_rotated(n_samples: int = 100, rotation: float = 30.0, noise: float = 0.05) -> tuple:
    """`(x_source, y_source, x_target, y_target)` as ADAPT's notebook makes them."""
    try:
        from sklearn.datasets import make_moons
    except ImportError as error:
        sys.exit(f"the two moons are scikit-learn's make_moons ({error}); install it with: pip install scikit-learn")

    x_source, y_source = make_moons(n_samples=n_samples, noise=noise, random_state=0)
    x_source[:, 0] -= 0.5
    theta = np.radians(-rotation)
    rotation_matrix = np.array(((np.cos(theta), -np.sin(theta)), (np.sin(theta), np.cos(theta))))
    x_target = x_source.dot(rotation_matrix)
    return x_source.astype("float32"), y_source, x_target.astype("float32"), y_source.copy()


def dense_stack(units: tuple, last_activation: str, inputs: int) -> keras.Sequential:
    layers = [keras.Input((inputs,))] + [keras.layers.Dense(n, activation="relu") for n in units[:-1]]
    return keras.Sequential(layers + [keras.layers.Dense(units[-1], activation=last_activation)])


def encoder() -> keras.Sequential:
    return dense_stack((10,), "relu", 2)


def label_head(classes: int) -> keras.Sequential:
    return dense_stack((10, 10, classes), "softmax" if classes > 1 else "sigmoid", 10)


def domain_head(inputs: int = 10) -> keras.Sequential:
    """`inputs`: DANN's 10 features, or CDAN's multilinear map of 10 features and 2 classes (20)."""
    return dense_stack((10, 10, 1), "sigmoid", inputs)


def optimizer() -> keras.optimizers.Optimizer:
    return keras.optimizers.Adam(0.001, beta_1=0.5)


def target_accuracy(predictions: np.ndarray, y_target: np.ndarray) -> float:
    predictions = np.asarray(predictions)
    labels = predictions.argmax(-1) if predictions.shape[-1] > 1 else (predictions[:, 0] > 0.5).astype(int)
    return float(np.mean(labels == y_target))


def train_ours(method: str, data: tuple, seed: int, epochs: int) -> float:
    x_source, y_source, x_target, y_target = data
    keras.utils.set_random_seed(seed)
    conditional = method.startswith("cdan")
    loss = "sparse_categorical_crossentropy" if conditional else "binary_crossentropy"
    labels = y_source if conditional else y_source.astype("float32")[:, None]
    steps = dict(epochs=epochs, steps_per_epoch=STEPS_PER_EPOCH, batch_size=2 * BATCH_PER_DOMAIN)
    if method == "source_only":
        model = keras.Sequential([encoder(), label_head(1)])
        model.compile(optimizer=optimizer(), loss=loss)
        source = (
            tf.data.Dataset.from_tensor_slices((x_source, labels))
            .shuffle(len(x_source), seed=seed, reshuffle_each_iteration=True)
            .repeat()
            .batch(BATCH_PER_DOMAIN)
        )
        model.fit(source, epochs=epochs, steps_per_epoch=STEPS_PER_EPOCH, shuffle=False, verbose=0)
        return target_accuracy(model.predict(x_target, verbose=0), y_target)
    switch, compile_switch = next((v for k, v in SWITCHES.items() if method.endswith(k)), ({}, {}))
    if method.startswith("dann"):
        model = DANN(encoder(), label_head(1), domain_head(), **switch)
    elif conditional:
        model = CDAN(encoder(), label_head(2), domain_head(20), entropy_conditioning="cdan_e" in method, **switch)
    elif method.startswith("mdd"):
        model = MDD(encoder(), label_head(1), **switch)
    else:
        raise ValueError(f"unknown method {method!r}; accepted: {OURS + OURS_SWITCHED}")
    model.compile(optimizer=optimizer(), loss=loss, **compile_switch)
    model.fit(x_source, labels, target=x_target, seed=seed, verbose=0, **steps)
    return target_accuracy(model.predict(x_target, verbose=0), y_target)


def train_adapt(method: str, data: tuple, seed: int, epochs: int) -> float:
    try:
        from adapt.feature_based import CDAN as AdaptCDAN
        from adapt.feature_based import DANN as AdaptDANN
        from adapt.feature_based import MDD as AdaptMDD
    except ImportError as error:
        sys.exit(f"--adapt needs ADAPT 0.4.5 ({error}); install it with: {ADAPT_INSTALL}")
    x_source, y_source, x_target, y_target = data
    # ADAPT's random_state seeds NumPy and TensorFlow but not Keras 3's initializers: the task's
    # weights are drawn here (it has its Input), and ADAPT copies them.
    keras.utils.set_random_seed(seed)
    common = dict(optimizer=optimizer(), copy=True, random_state=seed, verbose=0)
    if method in ("adapt_cdan", "adapt_cdan_e"):
        one_hot = np.eye(2, dtype="float32")[y_source]
        model = AdaptCDAN(
            task=label_head(2), entropy=method == "adapt_cdan_e", loss="categorical_crossentropy", **common
        )
        model.fit(x_source, one_hot, x_target, y_target, epochs=epochs, batch_size=BATCH_PER_DOMAIN, verbose=0)
    else:
        if method == "adapt_mdd":
            model = AdaptMDD(task=label_head(1), loss="bce", **common)
        elif method in ("adapt_dann", "adapt_source_only"):
            lambda_ = 1.0 if method == "adapt_dann" else 0.0
            model = AdaptDANN(task=label_head(1), loss="bce", lambda_=lambda_, gamma=10.0, **common)
        else:
            raise ValueError(f"unknown method {method!r}; accepted: {ADAPT}")
        model.fit(x_source, y_source, x_target, y_target, epochs=epochs, batch_size=BATCH_PER_DOMAIN, verbose=0)
    return target_accuracy(model.predict(x_target, verbose=0), y_target)


def method_list(text: str) -> list[str]:
    methods = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in methods if m not in OURS + OURS_SWITCHED + ADAPT]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown methods {unknown}; accepted: {OURS + OURS_SWITCHED + ADAPT}")
    return methods


def run_over_seeds(names: list[str], seeds: list[int], train_for, epochs: int, width: int) -> None:
    """Trains each of `names` on each seed with `train_for(name)(name, data, seed,
    epochs)`, printing a line per seed, then min / mean / max per name."""
    data = make_moons_rotated()
    results: dict = {name: [] for name in names}
    for seed in seeds:
        line = [f"seed {seed}"]
        for name in names:
            start = time.perf_counter()
            results[name].append(train_for(name)(name, data, seed, epochs))
            line.append(f"{name} {results[name][-1]:.3f} ({time.perf_counter() - start:.0f} s)")
        print("  ".join(line), flush=True)
    print(f"target accuracy over {len(seeds)} seeds ({epochs * STEPS_PER_EPOCH} steps):")
    for name, values in results.items():
        print(f"  {name:{width}s} min {min(values):.3f}  mean {np.mean(values):.3f}  max {max(values):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=seed_range, default=seed_range("0-9"))
    parser.add_argument("--methods", type=method_list, default=list(OURS + OURS_SWITCHED))
    parser.add_argument("--adapt", action="store_true", help="also ADAPT 0.4.5's own methods")
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    methods = args.methods + (list(ADAPT) if args.adapt else [])
    run_over_seeds(
        methods, args.seeds, lambda method: train_adapt if method.startswith("adapt_") else train_ours, args.epochs, 18
    )


if __name__ == "__main__":
    main()
