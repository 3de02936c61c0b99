"""Shifts designed after the Student's recipe and the label-free default were
fixed (the commit docs/results/validators.md names, "Combine, then teach"),
run once and reported as measured:

* blobs-reversed (a class-proportion change): blobs' three classes, the
  target rotated 35 degrees and scaled by 1.15, its class proportions
  0.15 / 0.35 / 0.5 (blobs' own target has 0.5 / 0.3 / 0.2);
* moons-imbalanced (a class-proportion change): the moons' target a fresh
  draw with three points of the upper moon for each of the lower one,
  sheared (x += 0.4 y) and rotated 25 degrees;
* moons-stretched: the moons' target a fresh draw with twice the noise
  (sd 0.1), stretched by 1.3 along x, rotated 30 degrees and moved by
  (0.2, 0.2).

The networks and the training are blobs' and the moons' (`validator_shifts`).
No image shift at fashion-mnist-m's cost could be run in the session that
fixed the recipe (docs/results/validators.md says so).
"""

from __future__ import annotations

import numpy as np
from validator_shifts import Data, Shift, _adam, _points_parts

from grad_reverse.demo import problems
from grad_reverse.demo.data import MOON_NOISE, POINTS_PER_MOON, make_domains, make_moons, rotate


def blobs_reversed(seed: int) -> Data:
    rng = np.random.default_rng(seed)
    x_source, y_source = problems._blob_sample((problems.BLOB_SOURCE_PER_CLASS,) * 3, rng)
    counts = tuple(int(round(p * problems.BLOB_TARGET_POINTS)) for p in (0.15, 0.35, 0.5))
    x_target, y_target = problems._blob_sample(counts, rng)
    return Data(x_source, y_source, (1.15 * rotate(x_target, 35.0)).astype("float32"), y_target)


def _moons_target(seed: int, per_class: int, noise: float) -> tuple:
    return make_moons(per_class, noise, np.random.default_rng(seed + 3000))


def moons_imbalanced(seed: int) -> Data:
    source = make_domains(seed)
    x, y = _moons_target(seed, 2 * POINTS_PER_MOON, MOON_NOISE)
    rng = np.random.default_rng(seed + 3001)
    upper = rng.choice(np.flatnonzero(y == 0), int(1.5 * POINTS_PER_MOON), replace=False)
    lower = rng.choice(np.flatnonzero(y == 1), POINTS_PER_MOON // 2, replace=False)
    keep = np.sort(np.concatenate([upper, lower]))
    shear = np.array([[1.0, 0.4], [0.0, 1.0]], dtype="float32")
    x_target = rotate(x[keep] @ shear.T, 25.0).astype("float32")
    return Data(source.x_source, source.y_source.reshape(-1, 1).astype("float32"), x_target, y[keep].astype("int64"))


def moons_stretched(seed: int) -> Data:
    source = make_domains(seed)
    x, y = _moons_target(seed, POINTS_PER_MOON, 2 * MOON_NOISE)
    x_target = (rotate(x * np.array([1.3, 1.0], dtype="float32"), 30.0) + 0.2).astype("float32")
    return Data(source.x_source, source.y_source.reshape(-1, 1).astype("float32"), x_target, y.astype("int64"))


TEACH_SHIFTS = {
    "blobs-reversed": Shift(
        blobs_reversed, _points_parts("blobs"), _adam, "sparse_categorical_crossentropy", 1.0, 1000, 256
    ),
    "moons-imbalanced": Shift(moons_imbalanced, _points_parts("moons"), _adam, "binary_crossentropy", 6.0, 1000, 256),
    "moons-stretched": Shift(moons_stretched, _points_parts("moons"), _adam, "binary_crossentropy", 6.0, 1000, 256),
}
