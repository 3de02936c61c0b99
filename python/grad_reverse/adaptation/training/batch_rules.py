"""The rules of the adversarial models' training batches that every backend shares:
the split of a batch between the domains, an epoch's length, the arguments
of Keras' `fit` the models refuse, and what `fit` hands Keras (`FitData`)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

DEFAULT_BATCH_SIZE = 64
_UNSUPPORTED_FIT_ARGUMENTS = ("validation_split", "sample_weight", "class_weight")


def split_batch_size(batch_size: int, source_fraction: float = 0.5) -> tuple[int, int]:
    """`(source, target)` points per batch: `batch_size` split by `source_fraction`."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 2:
        raise ValueError(f"batch_size must be an integer of at least 2 (source + target points), got {batch_size!r}")
    if not 0.0 < float(source_fraction) < 1.0:
        raise ValueError(f"source_fraction must be between 0 and 1 (exclusive), got {source_fraction!r}")
    source = min(max(int(round(batch_size * float(source_fraction))), 1), int(batch_size) - 1)
    return source, int(batch_size) - source


def one_pass_steps(source_length: int, source_batch: int) -> int:
    """One epoch: enough batches to see every labeled source point once."""
    return max(1, math.ceil(source_length / source_batch))


def check_fit_arguments(method: str, keras_kwargs: dict) -> None:
    """The arguments of Keras' `fit` the models cannot take, refused with what to do instead."""
    for unsupported in _UNSUPPORTED_FIT_ARGUMENTS:
        if keras_kwargs.get(unsupported) is not None:
            raise ValueError(
                f"{method}.fit does not take {unsupported}: put per-point weights of the source "
                "into the batches as ((x_source, x_target), y_source, weights) instead"
                if unsupported != "validation_split"
                else f"{method}.fit does not take validation_split: pass validation_data"
            )


@dataclasses.dataclass
class FitData:
    """What `fit` hands Keras: the batches, the steps of one epoch (the ramp's unit), the spec of one
    batch of source points (`(shape, dtype)`), what `StartFollowsKeras` positions (or None), and the
    `steps_per_epoch` Keras is given (None where the batches' length says it)."""

    batches: Any
    steps: int
    point_spec: tuple
    position: Any
    keras_steps_per_epoch: int | None
