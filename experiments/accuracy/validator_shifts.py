"""The shifts of the validators' study (`validator_study.py`): data, networks and
training of each, at the settings the project measured them at elsewhere
(docs/methods.md, docs/demo.md), so that the study's plain networks are
those pages' source-only ones.

* moons: the paper's inter-twinning moons, target rotated 35° (`demo.problems`).
* blobs: three classes, target rotated 45° with class proportions 0.5 / 0.3 / 0.2.
* moons-affine (new): the target a fresh draw of the source's moons, sheared
  (x += 0.8 y) and moved by (0.3, -0.4): a shift that is no rotation.
* digits-M: scikit-learn's digits, 16x16, against the other half blended with
  photograph patches (`digits_m.py`).
* digits-inverted (new image shift): the other half of the digits inverted
  (1 - pixel), tinted by a random colour per image and with Gaussian noise
  (sd 0.1): the strokes turn dark on light.
* fashion-mnist-m: Fashion-MNIST against its photograph-blended version
  (`demo.image_runs`), 6,000 images per domain to keep the study affordable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from digits_m import digits_m
from digits_m import parts as digit_parts

from grad_reverse._tools import keras
from grad_reverse.adaptation import DANNLearningRateSchedule
from grad_reverse.demo import image_runs, method_runs, problems
from grad_reverse.demo.data import make_domains

DIGIT_SIZE = 16
FASHION_LIMIT = 6000


class Data(NamedTuple):
    x_source: np.ndarray
    y_source: np.ndarray
    x_target: np.ndarray
    y_target: np.ndarray  # class numbers, for the study's record only


class Shift(NamedTuple):
    data: Callable[[int], Data]
    parts: Callable[[int], tuple]
    optimizer: Callable[[], object]
    loss: str
    lambda_max: float  # DANN's and CDAN's default here; the grid multiplies it
    steps: int
    batch_size: int


def _problem_data(problem: problems.Problem) -> Data:
    return Data(problem.x_source, problem.y_source, problem.x_target, problem.y_target)


def moons_affine(seed: int) -> Data:
    source = make_domains(seed)
    fresh = make_domains(seed + 1000)
    shear = np.array([[1.0, 0.8], [0.0, 1.0]], dtype="float32")
    x_target = (fresh.x_source @ shear.T + np.array([0.3, -0.4], dtype="float32")).astype("float32")
    return Data(source.x_source, source.y_source.reshape(-1, 1).astype("float32"), x_target, fresh.y_source.reshape(-1))


def digits_inverted(seed: int) -> Data:
    """digits-M's source half; its target half (the same split: `digits_m`'s first draw
    of `seed`) inverted, tinted and noisy instead of blended with photographs."""
    import tensorflow as tf
    from sklearn.datasets import load_digits

    x_source, y_source, _, y_target = digits_m(seed, DIGIT_SIZE)
    digits = load_digits()
    order = np.random.default_rng(seed).permutation(len(digits.images))
    target = order[len(order) // 2 :]
    grey = tf.image.resize(digits.images[target][..., None].astype("float32") / 16.0, (DIGIT_SIZE,) * 2).numpy()
    inverted = 1.0 - np.clip(grey, 0.0, 1.0)
    rng = np.random.default_rng(seed + 7)
    tint = rng.uniform(0.4, 1.0, size=(len(inverted), 1, 1, 3))
    noisy = inverted * tint + rng.normal(0.0, 0.1, size=inverted.shape[:3] + (3,))
    return Data(x_source, y_source, np.clip(noisy, 0.0, 1.0).astype("float32"), y_target)


def _fashion(seed: int) -> Data:
    from grad_reverse.demo import fashion_mnist
    from grad_reverse.demo.photo_patches import photographs

    p = image_runs.fashion_mnist_m(seed, fashion_mnist.load(), photographs(), limit=FASHION_LIMIT)
    return Data(p.x_source, p.y_source, p.x_target, p.y_target)


def _adam() -> object:
    return keras.optimizers.Adam(0.01, use_ema=True, ema_momentum=0.99)


def _sgd(steps: int) -> Callable[[], object]:
    return lambda: keras.optimizers.SGD(DANNLearningRateSchedule(0.01, steps), momentum=0.9)


def _points_parts(name: str) -> Callable[[int], tuple]:
    def parts(seed: int) -> tuple:
        return method_runs._parts(problems.PROBLEMS[name](seed), seed)

    return parts


def _digits_shift(data: Callable[[int], Data]) -> Shift:
    """A digit shift at digits_m.py's settings (600 SGD steps of 128, lambda_max 0.3)."""
    return Shift(
        data, lambda s: digit_parts(s, DIGIT_SIZE), _sgd(600), "sparse_categorical_crossentropy", 0.3, 600, 128
    )


SHIFTS = {
    "moons": Shift(
        lambda s: _problem_data(problems.moons(s)), _points_parts("moons"), _adam, "binary_crossentropy", 6.0, 1000, 256
    ),
    "blobs": Shift(
        lambda s: _problem_data(problems.blobs(s)),
        _points_parts("blobs"),
        _adam,
        "sparse_categorical_crossentropy",
        1.0,
        1000,
        256,
    ),
    "moons-affine": Shift(moons_affine, _points_parts("moons"), _adam, "binary_crossentropy", 6.0, 1000, 256),
    "digits-m": _digits_shift(lambda s: Data(*digits_m(s, DIGIT_SIZE))),
    "digits-inverted": _digits_shift(digits_inverted),
    "fashion-mnist-m": Shift(_fashion, image_runs.parts, _sgd(1500), "sparse_categorical_crossentropy", 1.0, 1500, 128),
}
