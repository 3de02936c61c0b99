"""The training batches of a `DANN`, `CDAN` or `MDD` model: labeled source and
unlabeled target points joined into one batch, half and half by default.

`paired_dataset` builds them from numpy arrays or `tf.data` datasets of
different sizes; each element is `((x_source, x_target), y_source)`, the
Keras `(x, y)` convention: the inputs of both domains, the labels of the
source. The checks here run before training starts, so bad input gets a
message naming what was expected instead of a shape error deep in a step;
each message names the method being trained (`method`), or `paired_dataset`
when it is called directly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from grad_reverse.adaptation.training.batch_rules import (
    DEFAULT_BATCH_SIZE,
    FitData,
    check_fit_arguments,
    one_pass_steps,
    split_batch_size,
)
from grad_reverse.schedule import whole

ArrayOrDataset = np.ndarray | tf.Tensor | tf.data.Dataset

# A shuffle buffer for datasets whose length tf.data cannot tell.
UNKNOWN_LENGTH_SHUFFLE_BUFFER = 10_000


def source_length(source: Any) -> int | None:
    """The number of labeled source points, or None when a dataset cannot tell."""
    if isinstance(source, tf.data.Dataset):
        n = int(source.cardinality())
        return n if n >= 0 else None
    return len(source[0])


def _is_dataset(value: Any) -> bool:
    return isinstance(value, tf.data.Dataset)


def _labeled_source(source: Any, method: str) -> tuple[tf.data.Dataset, tf.TensorShape, int | None]:
    """The source as a dataset of `(x, y)` points, its feature shape and length."""
    if _is_dataset(source):
        spec = source.element_spec
        if not (isinstance(spec, tuple) and len(spec) == 2):
            raise ValueError(
                f"{method}: the source data must be labeled: a dataset of (x, y) points "
                f"(unbatched), got elements {spec}"
            )
        return source, spec[0].shape, source_length(source)
    if not (isinstance(source, (tuple, list)) and len(source) == 2 and source[1] is not None):
        raise ValueError(
            f"{method}: the source data must be labeled: pass x and y (arrays of equal length), "
            "or a dataset of (x, y) points; got no labels"
        )
    x, y = (np.asarray(a) if not isinstance(a, tf.Tensor) else a for a in source)
    if len(x) != len(y):
        raise ValueError(f"{method}: source x and y must have the same length, got {len(x)} and {len(y)}")
    if len(x) == 0:
        raise ValueError(f"{method}: the source data is empty")
    return tf.data.Dataset.from_tensor_slices((x, y)), tf.TensorShape(x.shape[1:]), len(x)


def _unlabeled_target(target: Any, method: str) -> tuple[tf.data.Dataset, tf.TensorShape, int | None]:
    """The target as a dataset of points, its feature shape and length."""
    if target is None:
        where = method if method == "paired_dataset" else f"{method}.fit"
        raise ValueError(
            f"{where} needs unlabeled target-domain data: pass target=<array or dataset of "
            "points>, or x as a dataset of ((x_source, x_target), y_source) batches "
            "(see paired_dataset)"
        )
    labeled = f"{method}: the target data must be unlabeled (features only, as the model would be called on)"
    if _is_dataset(target):
        spec = target.element_spec
        if isinstance(spec, (tuple, dict)) or not isinstance(spec, tf.TensorSpec):
            raise ValueError(f"{labeled}: a dataset of single tensors, got elements {spec}")
        return target, spec.shape, source_length(target)
    if isinstance(target, (tuple, list)):
        raise ValueError(
            f"{labeled}: an array of points, got a {type(target).__name__} of {len(target)} items (labels?)"
        )
    x = np.asarray(target) if not isinstance(target, tf.Tensor) else target
    if len(x) == 0:
        raise ValueError(f"{method}: the target data is empty")
    return tf.data.Dataset.from_tensor_slices(x), tf.TensorShape(x.shape[1:]), len(x)


def check_same_features(source_shape: tf.TensorShape, target_shape: tf.TensorShape, method: str) -> None:
    """Source and target points must have the same shape (the model sees both)."""
    if not source_shape.is_compatible_with(target_shape):
        raise ValueError(
            f"{method}: source and target points must have the same shape, got source {source_shape} and "
            f"target {target_shape} (shapes without the batch dimension)"
        )


def _endless_batches(
    points: tf.data.Dataset, length: int | None, batch: int, shuffle: bool, seed: int | None
) -> tf.data.Dataset:
    if shuffle:
        points = points.shuffle(length or UNKNOWN_LENGTH_SHUFFLE_BUFFER, seed=seed)
    return points.repeat().batch(batch, drop_remainder=True)


def paired_dataset(
    source: Any,
    target: ArrayOrDataset,
    batch_size: int = 64,
    *,
    source_fraction: float = 0.5,
    shuffle: bool = True,
    seed: int | None = None,
    method: str = "paired_dataset",
) -> tf.data.Dataset:
    """Endless `((x_source, x_target), y_source)` batches for `DANN.fit` (and `CDAN`'s, `MDD`'s).

    Args:
      source: labeled source data: `(x, y)` arrays, or a dataset of `(x, y)` points (unbatched).
      target: unlabeled target data: an array of points, or a dataset of points (unbatched).
        Its size may differ from the source's; both repeat endlessly.
      batch_size: points per batch, source and target together.
      source_fraction: the source share of each batch (half by default).
      shuffle: reshuffle each domain on every pass.
      seed: shuffling seed of the source; the target uses `seed + 1`.
      method: the name the error messages start with (the model's, when its `fit` calls this).

    Each batch holds `round(batch_size * source_fraction)` source points and
    the rest target points; incomplete batches are dropped. Pass
    `steps_per_epoch` to `fit` (the dataset is endless).
    """
    source_points, source_shape, n_source = _labeled_source(source, method)
    target_points, target_shape, n_target = _unlabeled_target(target, method)
    check_same_features(source_shape, target_shape, method)
    source_batch, target_batch = split_batch_size(batch_size, source_fraction)
    target_seed = None if seed is None else seed + 1
    sources = _endless_batches(source_points, n_source, source_batch, shuffle, seed)
    targets = _endless_batches(target_points, n_target, target_batch, shuffle, target_seed)
    return tf.data.Dataset.zip((sources, targets)).map(lambda labeled, x_target: ((labeled[0], x_target), labeled[1]))


def check_paired_spec(spec: Any, method: str) -> None:
    """`fit(x=dataset)`: its elements must be `((x_source, x_target), y_source[, w])` batches."""
    ok = isinstance(spec, tuple) and len(spec) in (2, 3) and isinstance(spec[0], tuple) and len(spec[0]) == 2
    if not ok:
        raise ValueError(
            f"{method}.fit: a dataset passed as x must yield ((x_source, x_target), y_source) batches "
            f"(see grad_reverse.adaptation.paired_dataset); got elements {spec}. For a dataset of labeled "
            "source points, pass it with target=<target points>"
        )
    check_same_features(spec[0][0].shape[1:], spec[0][1].shape[1:], method)


def fit_batches(
    method: str,
    x: Any,
    y: Any,
    batch_size: int | None,
    target: Any,
    steps_per_epoch: int | None,
    source_fraction: float,
    shuffle: bool,
    seed: int | None,
    keras_kwargs: dict,
) -> tuple:
    """`(dataset of batches, steps per epoch, the spec of a source batch's points)` from what
    `fit(x, y, batch_size, target=..., ...)` was given (see `AdversarialModel.fit`);
    `keras_kwargs`, the arguments for Keras' `fit`, are checked for those it cannot take."""
    check_fit_arguments(method, keras_kwargs)
    if isinstance(x, tf.data.Dataset) and y is None and target is None:
        check_paired_spec(x.element_spec, method)
        if batch_size is not None:
            raise ValueError(f"{method}.fit: batch_size applies to arrays; a dataset of batches has its own")
        dataset, known = x, int(x.cardinality())
        steps = steps_per_epoch or (known if known > 0 else None)
    else:
        if y is None and not isinstance(x, tf.data.Dataset):
            raise ValueError(f"{method}: the source data must be labeled: fit(x_source, y_source, target=x_target)")
        if isinstance(x, tf.data.Dataset) and y is not None:
            raise ValueError(f"{method}.fit: with a dataset x, its elements carry the labels: pass y=None")
        source = x if isinstance(x, tf.data.Dataset) else (x, y)
        batch_size = DEFAULT_BATCH_SIZE if batch_size is None else batch_size
        dataset = paired_dataset(
            source, target, batch_size, source_fraction=source_fraction, shuffle=shuffle, seed=seed, method=method
        )
        n_source = source_length(source)
        source_batch, _ = split_batch_size(batch_size, source_fraction)
        steps = steps_per_epoch or (None if n_source is None else one_pass_steps(n_source, source_batch))
    if steps_per_epoch is not None:
        whole(f"{method}.fit: steps_per_epoch", steps_per_epoch, 1)
    if steps is None:
        raise ValueError(f"{method}.fit: this data does not tell its length; pass steps_per_epoch")
    return dataset, steps, dataset.element_spec[0][0]


def from_position(batches: tf.data.Dataset, position: tf.Variable) -> tf.data.Dataset:
    """`batches` from batch number `position`, read when an iterator starts (not now).

    `fit` hands Keras its dataset before Keras knows the epoch it starts at;
    reading the position inside the dataset's function defers it to the first
    batch drawn, after `StartFollowsKeras` set it. `batches` must be
    deterministic (seeded) for the skipped batches to be the ones an earlier
    process drew.
    """
    return tf.data.Dataset.from_tensors(tf.constant(0, tf.int64)).flat_map(
        lambda _: batches.skip(position.read_value())
    )


def fit_data(method: str, *args: Any) -> Any:
    """`fit`'s batches on TensorFlow (`fit_batches`' arguments): an endless dataset of batches is
    read from a position `StartFollowsKeras` sets (see `resume`)."""

    dataset, steps, spec = fit_batches(method, *args)
    position = None
    if int(dataset.cardinality()) == tf.data.INFINITE_CARDINALITY:
        position = tf.Variable(0, dtype=tf.int64, trainable=False, name="batch_position")
        dataset = from_position(dataset, position)
    return FitData(dataset, steps, (tuple(spec.shape), spec.dtype.name), position, steps)
