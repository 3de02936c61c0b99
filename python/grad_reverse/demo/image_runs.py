"""Fashion-MNIST -> Fashion-MNIST-M: the paper's MNIST -> MNIST-M experiment
(Ganin et al., JMLR 2016, §5.2.4) on Fashion-MNIST's real images, for

    python -m grad_reverse demo --problem fashion-mnist-m [--methods ...] [--seed ...] [--steps N]

Data (`fashion_mnist_m`): the training set's 60,000 images split at random
(per seed) into two disjoint halves: the source (grey, repeated over three
channels, with labels) and the target (each image blended with a random patch
of a photograph, `photo_patches.blend_with_patches`; its labels are used by
the ceiling only). Evaluation on the test set's 10,000 images in both
versions (the target version with its own patches). Each image is
standardised on its own, per channel (`standardise`: its mean subtracted,
divided by its standard deviation plus `STD_FLOOR`), so that a patch's
brightness and colour cast is no domain cue for free (docs/methods.md has
what one mean over all images gave instead).

Network (`parts`): the paper's for MNIST: conv 5x5 32 relu, max-pool 2, conv
5x5 48 relu, max-pool 2 (the features, 768 values); label head 100-100-10
relu + softmax; domain head 100 relu + 1 sigmoid. Training: SGD with
momentum 0.9 and the paper's annealing (`DANNLearningRateSchedule`: 0.01 /
(1 + 10 p)^0.75), lambda ramped as the paper's `2 / (1 + exp(-10 p)) - 1`
times `LAMBDA_MAX`, batches of `BATCH_SIZE` (half source, half target).

Methods: `plain` (the DANN with domain_loss_weight 0), `dann`, `cdan`,
`cdan_e`, `mdd`, and `target_trained`: the same network and batches trained
on the target half's labels, the ceiling adaptation is measured against.
Every method of a seed starts from the same weights. docs/methods.md has
what was measured and what was tried.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from grad_reverse.demo import method_runs

IMAGE_METHODS = ("plain", "dann", "cdan", "cdan_e", "mdd", "target_trained")
BATCH_SIZE = 128  # source + target, as the paper's 64 + 64 (Ganin's code)
LAMBDA_MAX = 1.0
LEARNING_RATE = 0.01
STEPS = 3000
FEATURES = 768  # 4 x 4 x 48 after the second pooling
STD_FLOOR = 0.05  # of pixels in [0, 1]: keeps a near-uniform image (a flat patch) from being blown up to noise


class ImageProblem(NamedTuple):
    name: str
    classes: int
    x_source: np.ndarray  # float32 [n, 28, 28, 3], standardised
    y_source: np.ndarray  # int32 [n]
    x_target: np.ndarray  # the other half, blended; labels for the ceiling only
    y_target: np.ndarray
    x_test_source: np.ndarray  # the test set, grey
    x_test_target: np.ndarray  # the test set, blended
    y_test: np.ndarray
    source_index: np.ndarray  # which training images are the source's, which the target's
    target_index: np.ndarray


def standardise(images: np.ndarray) -> np.ndarray:
    """Each image and channel to mean 0, divided by its standard deviation plus `STD_FLOOR`."""
    mean = images.mean(axis=(1, 2), keepdims=True)
    return ((images - mean) / (images.std(axis=(1, 2), keepdims=True) + STD_FLOOR)).astype("float32")


def fashion_mnist_m(seed: int, data: Any, photos: list, limit: int | None = None) -> ImageProblem:
    """The problem for `seed` (halves, patches) from `data` (`fashion_mnist.load`'s) and
    `photos` (`photo_patches.photographs()`); `limit` caps each half and the test set."""
    from grad_reverse.demo.photo_patches import blend_with_patches

    rng = np.random.default_rng(seed)
    order = rng.permutation(len(data.x_train))
    half = len(order) // 2
    source, target = order[:half], order[half:]
    test = np.arange(len(data.x_test))
    if limit is not None:
        source, target, test = source[:limit], target[:limit], test[:limit]
    grey = data.x_train.astype("float32") / 255.0
    grey_test = data.x_test[test].astype("float32") / 255.0
    x_source = np.repeat(grey[source][..., None], 3, axis=-1)
    x_target = blend_with_patches(grey[target], photos, rng)
    x_test_source = np.repeat(grey_test[..., None], 3, axis=-1)
    x_test_target = blend_with_patches(grey_test, photos, rng)
    return ImageProblem(
        "fashion-mnist-m",
        10,
        standardise(x_source),
        data.y_train[source].astype("int32"),
        standardise(x_target),
        data.y_train[target].astype("int32"),
        standardise(x_test_source),
        standardise(x_test_target),
        data.y_test[test].astype("int32"),
        source,
        target,
    )


def parts(seed: int, input_shape: tuple = (28, 28, 3)) -> tuple:
    """(features, label head, domain head) of the paper's MNIST network, weights drawn from `seed`."""
    from grad_reverse._keras import keras

    keras.utils.set_random_seed(seed)
    layers = keras.layers
    features = keras.Sequential(
        [
            keras.Input(input_shape),
            layers.Conv2D(32, 5, activation="relu"),
            layers.MaxPooling2D(2),
            layers.Conv2D(48, 5, activation="relu"),
            layers.MaxPooling2D(2),
            layers.Flatten(),
        ]
    )
    label = keras.Sequential(
        [
            keras.Input((FEATURES,)),
            layers.Dense(100, activation="relu"),
            layers.Dense(100, activation="relu"),
            layers.Dense(10, activation="softmax"),
        ]
    )
    domain = keras.Sequential([layers.Dense(100, activation="relu"), layers.Dense(1, activation="sigmoid")])
    return features, label, domain


def build(method: str, seed: int, steps: int, lambda_max: float = LAMBDA_MAX) -> Any:
    """The compiled model of `method` (`target_trained` and `plain`: a DANN without its domain term)."""
    from grad_reverse._keras import keras
    from grad_reverse.adaptation import CDAN, DANN, MDD, DANNLearningRateSchedule

    if method not in IMAGE_METHODS:
        raise ValueError(f"demo: unknown method {method!r}; accepted: {IMAGE_METHODS}")
    features, label, domain = parts(seed)
    extra: dict = {}
    if method in ("cdan", "cdan_e"):
        model = CDAN(features, label, domain, lambda_max=lambda_max, entropy_conditioning=method == "cdan_e")
    elif method == "mdd":
        model = MDD(features, label)
    else:
        model = DANN(features, label, domain, lambda_max=lambda_max)
        if method != "dann":
            extra = {"domain_loss_weight": 0.0}
    optimizer = keras.optimizers.SGD(DANNLearningRateSchedule(LEARNING_RATE, steps), momentum=0.9)
    model.compile(optimizer, "sparse_categorical_crossentropy", **extra)
    return model


def accuracy(model: Any, x: np.ndarray, y: np.ndarray, batch: int = 1000) -> float:
    """Fraction of `x` whose most probable class is `y` (called in batches: no predict() retracing)."""
    right = 0
    for start in range(0, len(x), batch):
        scores = np.asarray(model(x[start : start + batch], training=False))
        right += int(np.sum(scores.argmax(1) == y[start : start + batch]))
    return right / len(x)


def train(method: str, problem: ImageProblem, seed: int, steps: int, lambda_max: float = LAMBDA_MAX) -> Any:
    """`method`'s model of `seed`, trained `steps` steps on `problem`."""
    model = build(method, seed, steps, lambda_max)
    x, y = (problem.x_target, problem.y_target) if method == "target_trained" else (problem.x_source, problem.y_source)
    model.fit(x, y, target=problem.x_target, batch_size=BATCH_SIZE, steps_per_epoch=steps, seed=seed, verbose=0)
    return model


def run(
    methods: list,
    seeds: list,
    steps: int,
    data: Any = None,
    limit: int | None = None,
    quiet: bool = False,
    trained: Callable | None = None,
    lambda_max: float = LAMBDA_MAX,
) -> dict:
    """Trains each method on each seed; scores each on the test set's target
    version (`accuracy`, as the other problems' `method_runs.run`) and source
    version (`source_accuracy`). `data`: Fashion-MNIST as `fashion_mnist.load`
    returns it (None: loaded from where `fashion_mnist.find` looks).
    `trained(seed, method, model, problem)`, if given, sees every model once it is scored."""
    from grad_reverse.demo import label_free
    from grad_reverse.demo.fashion_mnist import load
    from grad_reverse.demo.photo_patches import photographs

    data, photos = (load() if data is None else data), photographs()
    results: dict = {m: [] for m in methods}
    picks: list = []
    ensembles: list = []
    source_results: dict = {m: [] for m in methods}
    seconds: dict = {m: 0.0 for m in methods}
    for seed in seeds:
        problem = fashion_mnist_m(seed, data, photos, limit)
        models: dict = {}
        for method in methods:
            start = time.perf_counter()
            model = train(method, problem, seed, steps, lambda_max)
            seconds[method] += time.perf_counter() - start
            results[method].append(accuracy(model, problem.x_test_target, problem.y_test))
            source_results[method].append(accuracy(model, problem.x_test_source, problem.y_test))
            models[method] = model
            if trained is not None:
                trained(seed, method, model, problem)
            if not quiet:
                print(
                    f"seed {seed} {method:14s} target accuracy {results[method][-1]:.3f} "
                    f"(source {source_results[method][-1]:.3f})",
                    flush=True,
                )
        if label_free.PLAIN in models:  # held-out source: the test set's grey images, which no fit saw
            chosen = label_free.selection(models, problem.x_test_source, problem.y_test, problem.x_target, seed)
            picks.append(chosen.name)
            ensembles.append(accuracy(chosen.ensemble, problem.x_test_target, problem.y_test))
    return {
        "problem": "fashion-mnist-m",
        "steps": steps,
        "seeds": seeds,
        "accuracy": results,
        "source_accuracy": source_results,
        "fit_seconds": seconds,
        "label_free_picks": picks,
        "label_free_ensemble": ensembles,
    }


def gap_closed(result: dict) -> dict:
    """Each adaptation method's share of the gap between the plain network's mean target
    accuracy and the ceiling's (`target_trained`); empty without both, None for a gap <= 0."""
    means = {m: float(np.mean(v)) for m, v in result["accuracy"].items()}
    if not {"plain", "target_trained"} <= set(means):
        return {}
    gap = means["target_trained"] - means["plain"]
    return {
        m: (means[m] - means["plain"]) / gap if gap > 0 else None for m in means if m not in ("plain", "target_trained")
    }


def table(result: dict) -> str:
    seeds = len(result["seeds"])
    closed = gap_closed(result)
    lines = [
        f"{result['problem']}: test accuracy over {seeds} seed{'s' if seeds > 1 else ''}, {result['steps']} steps",
        f"{'method':14s} {'target min':>10s} {'mean':>6s} {'max':>6s} {'source mean':>11s} {'gap closed':>10s} "
        f"{'fit s/seed':>10s}",
    ]
    for method, values in result["accuracy"].items():
        share = closed.get(method)
        share_text = f"{share:+.0%}" if share is not None else ("n/a" if method in closed else "")
        lines.append(
            f"{method:14s} {min(values):10.3f} {np.mean(values):6.3f} {max(values):6.3f} "
            f"{np.mean(result['source_accuracy'][method]):11.3f} {share_text:>10s} "
            f"{result['fit_seconds'][method] / len(values):10.1f}"
        )
    return "\n".join(lines + method_runs.label_free_lines(result))
