"""A target domain made as MNIST-M was (Ganin et al., JMLR 2016, §5.2.4):
each grey image blended with a random patch of a colour photograph,
`|image - patch|` per channel, so that shapes stay and colours, textures and
contrast change from image to image.

MNIST-M took its patches from BSDS500; here they come from the photographs
scikit-learn ships (`sklearn.datasets.load_sample_images`: a Chinese temple
and a flower, 427 x 640 each), so that nothing is downloaded. scikit-learn is
not a dependency of the package: `pip install 'grad-reverse[images]'` adds it.
Numpy only otherwise: no TensorFlow.
"""

from __future__ import annotations

import numpy as np

MISSING_SKLEARN = (
    "the target domain's photographs are scikit-learn's sample images, and scikit-learn is not installed: "
    "pip install scikit-learn  (or pip install 'grad-reverse[images]')"
)


class PhotosMissing(Exception):
    """scikit-learn (which ships the photographs) is not installed; the message says how to add it."""


def check_photographs_available() -> None:
    """Raises `PhotosMissing` unless scikit-learn's sample images can be loaded (a cheap check)."""
    import importlib.util

    if importlib.util.find_spec("sklearn") is None:
        raise PhotosMissing(MISSING_SKLEARN)


def photographs() -> list:
    """scikit-learn's sample photographs as float32 `[rows, cols, 3]` arrays in [0, 1]."""
    check_photographs_available()
    from sklearn.datasets import load_sample_images

    return [image.astype("float32") / 255.0 for image in load_sample_images().images]


def blend_with_patches(grey: np.ndarray, photos: list, rng: np.random.Generator) -> np.ndarray:
    """`|grey - patch|` per channel, one random patch per image.

    `grey`: float `[n, rows, cols]` or `[n, rows, cols, 1]` in [0, 1]; each
    image gets its own photograph (uniformly among `photos`) and its own
    `rows x cols` window in it, uniformly placed. Returns float32
    `[n, rows, cols, 3]` in [0, 1].
    """
    grey = np.asarray(grey, dtype="float32")
    if grey.ndim == 4 and grey.shape[-1] == 1:
        grey = grey[..., 0]
    if grey.ndim != 3:
        raise ValueError(f"grey images must be [n, rows, cols] or [n, rows, cols, 1], got shape {grey.shape}")
    n, rows, cols = grey.shape
    for photo in photos:
        if photo.ndim != 3 or photo.shape[0] < rows or photo.shape[1] < cols:
            raise ValueError(f"a photograph of shape {photo.shape} has no {rows} x {cols} window in colour")
    which = rng.integers(len(photos), size=n)
    out = np.empty((n, rows, cols, 3), dtype="float32")
    for i in range(n):
        photo = photos[which[i]]
        top = rng.integers(photo.shape[0] - rows + 1)
        left = rng.integers(photo.shape[1] - cols + 1)
        out[i] = np.abs(grey[i, :, :, None] - photo[top : top + rows, left : left + cols, :3])
    return out
