"""Fashion-MNIST (Xiao, Rasul and Vollgraf 2017) from its four IDX files, read
where a system package or Keras left them: nothing is downloaded here.

Searched in this order (the first folder that holds all four files wins):

1. the folder given (`demo --data DIR`), and only that one when given;
2. `/usr/share/datasets/fashion-mnist/`: Debian's and Ubuntu's package
   `dataset-fashion-mnist` (`apt install dataset-fashion-mnist`);
3. Keras' cache, `$KERAS_HOME/datasets/fashion-mnist/` (`~/.keras` without
   `KERAS_HOME`), where `keras.datasets.fashion_mnist.load_data()` stores
   what it downloads.

Each file may be gzip'd (`NAME.gz`, as both of the above store them) or
not (`NAME`). Numpy only: no TensorFlow.
"""

from __future__ import annotations

import gzip
import os
from typing import NamedTuple

import numpy as np

DEBIAN_DIR = "/usr/share/datasets/fashion-mnist"
FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")
# IDX: two zero bytes, a type code (0x08: unsigned bytes), the number of
# dimensions, then each dimension as a big-endian 32-bit integer.
_UNSIGNED_BYTE = 0x08

MISSING_MESSAGE = (
    "Fashion-MNIST's IDX files were not found (looked in: {looked}). Install them with\n"
    "  sudo apt install dataset-fashion-mnist      (Debian, Ubuntu: {debian})\n"
    "or let Keras download them into its cache once:\n"
    '  python -c "import keras; keras.datasets.fashion_mnist.load_data()"\n'
    "or give the folder that holds {names} (each may be .gz) with --data DIR."
)


class DataMissing(Exception):
    """No folder searched holds the four files; the message says how to get them."""


class FashionMNIST(NamedTuple):
    x_train: np.ndarray  # uint8 [60000, 28, 28]
    y_train: np.ndarray  # uint8 [60000]
    x_test: np.ndarray  # uint8 [10000, 28, 28]
    y_test: np.ndarray  # uint8 [10000]
    directory: str


def keras_cache_dir() -> str:
    """Where `keras.datasets.fashion_mnist` keeps the files (its `KERAS_HOME` rule)."""
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    return os.path.join(home, "datasets", "fashion-mnist")


def search_dirs(data_dir: str | None = None) -> list:
    """The folders looked in, in order: `data_dir` alone if given, else Debian's, then Keras'."""
    return [data_dir] if data_dir else [DEBIAN_DIR, keras_cache_dir()]


def _file(directory: str, name: str) -> str | None:
    for candidate in (name + ".gz", name):
        path = os.path.join(directory, candidate)
        if os.path.isfile(path):
            return path
    return None


def find(data_dir: str | None = None) -> str:
    """The first folder of `search_dirs(data_dir)` with all four files; `DataMissing` if none."""
    dirs = search_dirs(data_dir)
    for directory in dirs:
        if all(_file(directory, name) for name in FILES.values()):
            return directory
    raise DataMissing(
        MISSING_MESSAGE.format(looked=", ".join(dirs), debian=DEBIAN_DIR, names=", ".join(FILES.values()))
    )


def read_idx(path: str) -> np.ndarray:
    """The array in an IDX file of unsigned bytes (gzip'd when the name ends in .gz).

    Raises ValueError, naming the file, when the header is not an IDX header
    of unsigned bytes or the data is shorter or longer than the header says.
    """
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != _UNSIGNED_BYTE:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes (its first bytes: {data[:4].hex()})")
    rank = data[3]
    header = 4 + 4 * rank
    if rank < 1 or len(data) < header:
        raise ValueError(f"{path}: IDX header of {rank} dimensions is cut short ({len(data)} bytes)")
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", count=rank, offset=4))
    expected = header + int(np.prod(shape))
    if len(data) != expected:
        raise ValueError(f"{path}: IDX header says shape {shape} ({expected} bytes in all), the file has {len(data)}")
    return np.frombuffer(data, np.uint8, offset=header).reshape(shape)


def load(data_dir: str | None = None) -> FashionMNIST:
    """The training and test sets from the first folder `find(data_dir)` returns.

    Raises `DataMissing` (no folder has them) or ValueError (a file is not
    what it should be: not IDX, images not `[n, rows, cols]`, labels not one
    per image or outside 0-9).
    """
    directory = find(data_dir)
    arrays = {key: read_idx(_file(directory, name)) for key, name in FILES.items()}
    for split in ("train", "test"):
        images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise ValueError(
                f"{directory}: the {split} images must be [n, rows, cols] with one label each; "
                f"got images {images.shape}, labels {labels.shape}"
            )
        if labels.size and labels.max() >= len(CLASSES):
            raise ValueError(f"{directory}: {split} labels must be 0-9, found {int(labels.max())}")
    return FashionMNIST(
        arrays["train_images"], arrays["train_labels"], arrays["test_images"], arrays["test_labels"], directory
    )
