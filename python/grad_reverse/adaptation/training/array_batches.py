"""The training batches of `fit(x, y, target=...)` without TensorFlow (Keras on JAX
or PyTorch), and the batch rules every backend shares.

`PairedBatches` draws the paper's batches from numpy arrays: `source_batch`
labeled source points and `target_batch` target points each. Each domain is
an endless stream of passes over its points, each pass in its own seeded
order (`numpy.random.default_rng((seed, pass))`); batch number `k` takes the
stream's points `k * b` to `k * b + b - 1`. A batch is thus a function of its
number alone: a fit resumed at any epoch (`StartFollowsKeras` sets the
epoch's first batch number) draws the uninterrupted fit's batches, and
nothing is drawn twice or skipped. On TensorFlow `tf.data` draws them
(`batches.paired_dataset`), in another order from the same rules.

Under Keras' distribution API on many processes (`training.distribution`),
each process is given the same arrays and yields its own slice (`share`) of
each domain's points of every global batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grad_reverse._keras import keras
from grad_reverse.adaptation.training import distribution
from grad_reverse.adaptation.training.batch_rules import (
    DEFAULT_BATCH_SIZE,
    FitData,
    check_fit_arguments,
    one_pass_steps,
    split_batch_size,
)


def _pass_order(length: int, seed: int, number: int, shuffle: bool) -> np.ndarray:
    if not shuffle:
        return np.arange(length)
    return np.random.default_rng((seed, number)).permutation(length)


class _Stream:
    """One domain's endless stream of seeded passes over `length` points."""

    def __init__(self, length: int, batch: int, seed: int, shuffle: bool) -> None:
        self.length, self.batch, self.seed, self.shuffle = length, batch, seed, shuffle
        self._orders: dict = {}

    def _order(self, number: int) -> np.ndarray:
        if number not in self._orders:
            if len(self._orders) > 4:  # batches move forward: keep the latest passes only
                self._orders.pop(min(self._orders))
            self._orders[number] = _pass_order(self.length, self.seed, number, self.shuffle)
        return self._orders[number]

    def indices(self, batch_number: int) -> np.ndarray:
        """The point indices of batch `batch_number`: slices of the passes' orders it spans."""
        start, end = batch_number * self.batch, (batch_number + 1) * self.batch
        pieces = []
        while start < end:  # one slice per pass the batch touches (a batch larger than the data: several)
            number, offset = divmod(start, self.length)
            taken = min(end - start, self.length - offset)
            pieces.append(self._order(number)[offset : offset + taken])
            start += taken
        return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)


class PairedBatches(keras.utils.PyDataset):
    """`((x_source, x_target), y_source)` batches, `steps` of them per epoch, drawn by batch number."""

    follows_epochs = True  # `StartFollowsKeras` gives the first batch number of every epoch

    def __init__(
        self,
        x: np.ndarray,
        y: np.ndarray,
        target: np.ndarray,
        split: tuple,
        steps: int,
        shuffle: bool,
        seed: int,
        share: distribution.Share | None = None,
    ) -> None:
        """`split`: the global batch's `(source, target)` points; `share`: the slice of them this process
        yields (all of them by default)."""
        super().__init__(workers=1, use_multiprocessing=False)
        self.x, self.y, self.target, self.share = x, y, target, share or distribution.Share()
        self.steps = int(steps)
        self._source = _Stream(len(x), split[0], seed, shuffle)
        self._target = _Stream(len(target), split[1], seed + 1, shuffle)
        self.first = 0  # the number of this epoch's first batch

    def __len__(self) -> int:
        return self.steps

    def assign(self, first: int) -> None:
        """The number of the next epoch's first batch."""
        self.first = int(first)

    def batch(self, number: int) -> tuple:
        """This process's share of batch `number` of the fit (counted from its first epoch)."""
        source = self.share.of(self._source.indices(number))
        target = self.share.of(self._target.indices(number))
        return (self.x[source], self.target[target]), self.y[source]

    def __getitem__(self, index: int) -> tuple:
        return self.batch(self.first + int(index))


def paired_dataset(*args: Any, **kwargs: Any) -> Any:
    """TensorFlow's (`batches.paired_dataset` makes tf.data batches); on JAX and PyTorch a
    TensorFlowOnly error that says what to pass `fit` instead."""
    from grad_reverse._keras import tensorflow_only

    error = tensorflow_only("grad_reverse.adaptation.paired_dataset", keras.backend.backend())
    raise type(error)(
        f"{error} On this backend, fit takes the arrays themselves: model.fit(x_source, y_source, "
        "target=x_target, batch_size=..., seed=...), or a keras.utils.PyDataset of "
        "((x_source, x_target), y_source) batches."
    )


def _as_array(value: Any, what: str, method: str) -> np.ndarray:
    if hasattr(value, "element_spec") or isinstance(value, keras.utils.PyDataset):
        raise ValueError(
            f"{method}.fit on Keras' {keras.backend.backend()} backend takes {what} as arrays (numpy or the "
            f"backend's tensors); datasets of points are tf.data's, on the TensorFlow backend"
        )
    array = keras.ops.convert_to_numpy(value) if not isinstance(value, np.ndarray) else value
    return np.asarray(array)


def _check_own_batches(method: str, source: int, target: int, steps: int) -> None:
    """A user's dataset of batches under a distribution: every process yields its own share, as Keras
    takes it with `auto_shard_dataset=False`; the shares must split across the devices, and every
    process must run as many steps with shares of one size."""
    placed = distribution.current()
    if placed is None:
        return
    processes = distribution.share_of_process().count
    distribution.check_batch(method, (source * processes, target * processes), placed)
    distribution.check_same_everywhere(method, {"the points of a batch": (source, target), "steps": steps})


def fit_data(
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
) -> Any:
    """`fit`'s batches on JAX and PyTorch: `PairedBatches` over arrays, or the user's own
    `keras.utils.PyDataset` of ready `((x_source, x_target), y_source)` batches (`target` None)."""
    from grad_reverse.schedule import whole

    check_fit_arguments(method, keras_kwargs)
    for name, value in (("x", x), ("target", target)):
        if hasattr(value, "element_spec"):
            raise ValueError(
                f"{method}.fit on Keras' {keras.backend.backend()} backend got a tf.data dataset as {name}: datasets "
                "of points or of batches are tf.data's, on the TensorFlow backend. Here, pass the arrays: "
                "fit(x_source, y_source, target=x_target), or a keras.utils.PyDataset of "
                "((x_source, x_target), y_source) batches"
            )
    if steps_per_epoch is not None:
        whole(f"{method}.fit: steps_per_epoch", steps_per_epoch, 1)
    if isinstance(x, keras.utils.PyDataset) and y is None and target is None:
        if batch_size is not None:
            raise ValueError(f"{method}.fit: batch_size applies to arrays; a dataset of batches has its own")
        (x_source, x_target), _ = x[0][:2]
        steps = steps_per_epoch or len(x)
        _check_own_batches(method, len(x_source), len(x_target), steps)
        spec = (tuple(x_source.shape), str(np.asarray(x_source).dtype))
        return FitData(x, steps, spec, None, steps_per_epoch)
    if y is None:
        raise ValueError(f"{method}: the source data must be labeled: fit(x_source, y_source, target=x_target)")
    if target is None:
        raise ValueError(
            f"{method}.fit needs unlabeled target-domain data: pass target=<array of points>, or x as a "
            "keras.utils.PyDataset of ((x_source, x_target), y_source) batches"
        )
    if isinstance(target, (tuple, list)):
        raise ValueError(
            f"{method}: the target data must be unlabeled (features only, as the model would be called on): "
            f"an array of points, got a {type(target).__name__} of {len(target)} items (labels?)"
        )
    x, y, target = _as_array(x, "the source points", method), _as_array(y, "the labels", method), target
    target = _as_array(target, "the target points", method)
    if len(x) != len(y):
        raise ValueError(f"{method}: source x and y must have the same length, got {len(x)} and {len(y)}")
    for name, points in (("source", x), ("target", target)):
        if len(points) == 0:
            raise ValueError(f"{method}: the {name} data is empty")
    if x.shape[1:] != target.shape[1:]:
        raise ValueError(
            f"{method}: source and target points must have the same shape, got source {x.shape[1:]} and "
            f"target {target.shape[1:]} (shapes without the batch dimension)"
        )
    batch_size = DEFAULT_BATCH_SIZE if batch_size is None else batch_size
    split = split_batch_size(batch_size, source_fraction)
    steps = steps_per_epoch or one_pass_steps(len(x), split[0])
    # Without a seed, one drawn now (on many processes, process 0's): the batches stay a function of their number.
    seed = distribution.common_seed(seed)
    seed = int(np.random.SeedSequence().entropy % (2**31)) if seed is None else int(seed)
    placed = distribution.current()
    if placed is not None:
        distribution.check_batch(method, split, placed)
        fields = {"x": x, "y": y, "target": target, "batch_size": split, "steps_per_epoch": steps}
        distribution.check_same_everywhere(method, {**fields, "shuffle": int(bool(shuffle)), "seed": seed})
    batches = PairedBatches(x, y, target, split, steps, bool(shuffle), seed, distribution.share_of_process())
    # The model is built on one point of the floating type Keras computes in (JAX has no float64 by default).
    dtype = keras.backend.floatx() if np.issubdtype(x.dtype, np.floating) else str(x.dtype)
    return FitData(batches, steps, ((1, *x.shape[1:]), dtype), batches, None)
