"""digits-M: the paper's MNIST -> MNIST-M in spirit, from data that ships in
scikit-learn, to see whether adversarial adaptation helps on images this small.

    pip install scikit-learn
    python experiments/accuracy/digits_m.py [--seeds 0-9] [--steps 600] [--lambda-max 0.3] [--size 16]

Source: scikit-learn's 1,797 digits (8x8, 17 grey levels) upscaled
(bilinear) to `--size` pixels and repeated over three channels; target: the
other half of the digits, each blended with a random patch of one of the two
colour photographs scikit-learn ships (`load_sample_images`) as MNIST-M was
made from BSDS500 patches, `|digit - patch|` per channel (the blending of
`grad_reverse.demo.photo_patches`, which `demo --problem fashion-mnist-m`
uses on Fashion-MNIST). Disjoint random
halves per seed. A small conv net (16 and 32 3x3 filters, 2x2 pooling, 64
features; label head 100 relu + softmax; domain head 100 relu + sigmoid),
SGD momentum 0.9 with the paper's annealing from 0.01, batches of 64 + 64.
Source-only (the DANN with domain_loss_weight 0), DANN, CDAN, CDAN+E, MDD
(its warm start to 0.1) on the same batches from the same weights, and the
same network trained on the target's labels: the ceiling. Prints one line
per seed and method, then min / mean / max target accuracy and the share of
the gap between source-only and the ceiling each method closes.

Not in CI (scikit-learn is no dependency of the package, and it takes ~10 min).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from dann_moons_seeds import seed_range  # noqa: E402

from grad_reverse._tools import keras  # noqa: E402
from grad_reverse.adaptation import (  # noqa: E402
    CDAN,
    DANN,
    MDD,
    DANNLearningRateSchedule,  # noqa: E402
)
from grad_reverse.demo.photo_patches import blend_with_patches, photographs  # noqa: E402

METHODS = ("source_only", "dann", "cdan", "cdan_e", "mdd", "target_trained")
BATCH = 128  # source + target; the ceiling trains on 64 target points per step
FEATURES = 64


def digits_m(seed: int, size: int) -> tuple:
    """(x_source, y_source, x_target, y_target): float32 [n, size, size, 3] in [0, 1], int32 labels."""
    from sklearn.datasets import load_digits

    rng = np.random.default_rng(seed)
    digits = load_digits()
    grey = tf.image.resize(digits.images[..., None].astype("float32") / 16.0, (size, size)).numpy()
    grey = np.clip(grey, 0.0, 1.0)
    labels = digits.target.astype("int32")
    order = rng.permutation(len(grey))
    source, target = order[: len(order) // 2], order[len(order) // 2 :]
    x_source = np.repeat(grey[source], 3, axis=-1)
    x_target = blend_with_patches(grey[target], photographs(), rng)
    return x_source, labels[source], x_target, labels[target]


def parts(seed: int, size: int) -> tuple:
    keras.utils.set_random_seed(seed)
    features = keras.Sequential(
        [
            keras.Input((size, size, 3)),
            keras.layers.Conv2D(16, 3, activation="relu", padding="same"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Conv2D(32, 3, activation="relu", padding="same"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Flatten(),
            keras.layers.Dense(FEATURES, activation="relu"),
        ]
    )
    label = keras.Sequential(
        [
            keras.Input((FEATURES,)),
            keras.layers.Dense(100, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    domain = keras.Sequential([keras.layers.Dense(100, activation="relu"), keras.layers.Dense(1, activation="sigmoid")])
    return features, label, domain


def target_accuracy(method: str, seed: int, args: argparse.Namespace) -> float:
    x_source, y_source, x_target, y_target = digits_m(seed, args.size)
    features, label, domain = parts(seed, args.size)
    optimizer = keras.optimizers.SGD(DANNLearningRateSchedule(0.01, args.steps), momentum=0.9)
    loss = "sparse_categorical_crossentropy"
    if method == "target_trained":
        model = keras.Sequential([features, label])
        model.compile(optimizer, loss)
        model.fit(
            x_target,
            y_target,
            batch_size=BATCH // 2,
            epochs=max(1, args.steps * BATCH // 2 // len(x_target)),
            verbose=0,
        )
    else:
        if method in ("source_only", "dann"):
            model = DANN(features, label, domain, lambda_max=args.lambda_max)
        elif method in ("cdan", "cdan_e"):
            model = CDAN(features, label, domain, lambda_max=args.lambda_max, entropy_conditioning=method == "cdan_e")
        else:
            model = MDD(features, label)
        model.compile(optimizer, loss, **({"domain_loss_weight": 0.0} if method == "source_only" else {}))
        model.fit(
            x_source, y_source, target=x_target, batch_size=BATCH, steps_per_epoch=args.steps, seed=seed, verbose=0
        )
    predicted = np.asarray(model(x_target, training=False)).argmax(1)
    return float(np.mean(predicted == y_target))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=seed_range, default=seed_range("0-9"))
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--lambda-max", type=float, default=0.3, help="DANN's and CDAN's ramp (default 0.3)")
    parser.add_argument("--size", type=int, default=16, help="image side in pixels (default 16)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    args = parser.parse_args()
    results = {method: [] for method in args.methods}
    for seed in args.seeds:
        for method in args.methods:
            start = time.perf_counter()
            results[method].append(target_accuracy(method, seed, args))
            print(
                f"seed {seed} {method:14s} target accuracy {results[method][-1]:.3f} "
                f"({time.perf_counter() - start:.0f} s)",
                flush=True,
            )
    means = {method: float(np.mean(values)) for method, values in results.items()}
    print(
        f"\ndigits-M {args.size}x{args.size}, {args.steps} steps, lambda_max {args.lambda_max:g}, "
        f"{len(args.seeds)} seeds: target accuracy"
    )
    print(f"{'method':14s} {'min':>6s} {'mean':>6s} {'max':>6s}  gap closed")
    for method, values in results.items():
        closed = ""
        if {"source_only", "target_trained"} <= set(means) and method not in ("source_only", "target_trained"):
            gap = means["target_trained"] - means["source_only"]
            closed = f"{(means[method] - means['source_only']) / gap:+.0%}" if gap > 0 else "n/a"
        print(f"{method:14s} {min(values):6.3f} {means[method]:6.3f} {max(values):6.3f}  {closed}")


if __name__ == "__main__":
    main()
