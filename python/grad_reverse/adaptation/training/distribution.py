"""`fit` under Keras' distribution API on JAX (`keras.distribution.DataParallel`
over many devices, of one process or of many: `keras.distribution.initialize`).

Keras runs the whole step as one program over the global batch: the
variables are replicated, the batch is split along its first axis across
the data axis' devices, and the means of the objective are over the global
batch, so the objective is one device's; only the order of float32 sums
differs (docs/distributed.md says what that costs).

What the models add to Keras' own:

* the global batch of `fit(x, y, target=...)` is the one-process batch:
  every process holds the same arrays and draws, from the same seeded
  stream, its own slice of each domain's share (`Share`); Keras joins the
  slices in process order (`jax.make_array_from_process_local_data`), which
  is the one-process batch. A process thus reads and computes its part only;
* the rules checked before any step, each error naming it: each domain's
  share of the batch divides across the data axis' devices; every variable
  was made under the distribution (`set_distribution` before the model is
  made); every process was given the same data, batch, steps and seed, and
  made and compiled the same model (its and `compile`'s configurations, names
  left out: `model_fields`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
from collections.abc import Iterator
from typing import Any

import numpy as np

from grad_reverse._keras import keras
from grad_reverse.backend_ops import BACKEND


def current() -> Any:
    """The distribution `keras.distribution.set_distribution` set (JAX), or None."""
    if BACKEND != "jax":
        return None
    return keras.distribution.distribution()


@dataclasses.dataclass(frozen=True)
class Share:
    """This process's part of each global batch: slice `index` of `count` equal slices."""

    index: int = 0
    count: int = 1

    def of(self, points: np.ndarray) -> np.ndarray:
        size = len(points) // self.count
        return points[self.index * size : (self.index + 1) * size]


def data_devices(distribution: Any) -> int:
    """The devices a batch is split across: the size of the mesh's batch axis."""
    mesh = distribution.device_mesh
    return int(mesh.shape[list(mesh.axis_names).index(distribution.batch_dim_name)])


def share_of_process() -> Share:
    """This process's share of a global batch (the whole batch without a distribution)."""
    distribution = current()
    if distribution is None:
        return Share()
    import jax

    return Share(jax.process_index(), jax.process_count())


def check_batch(method: str, split: tuple, distribution: Any) -> None:
    """Each domain's points of a global batch must split evenly across the data axis' devices."""
    devices = data_devices(distribution)
    for domain, points in zip(("source", "target"), split):
        if points % devices:
            raise ValueError(
                f"{method}.fit under {type(distribution).__name__}: each domain's share of the global batch must "
                f"divide across the {devices} devices of the batch axis (every device takes as many points of "
                f"each), and the {domain} share is {points} (batch_size={sum(split)} split {split[0]} source + "
                f"{split[1]} target). Pick a batch_size whose source and target shares are multiples of {devices}."
            )


def common_seed(seed: int | None) -> int | None:
    """The seed every process uses: its own where given; else process 0's, drawn once and sent to all
    (each process drawing its own would give the processes different batches)."""
    if seed is not None or current() is None:
        return seed
    import jax

    if jax.process_count() == 1:
        return seed
    from jax.experimental import multihost_utils

    drawn = np.int32(np.random.SeedSequence().entropy % (2**31))
    return int(multihost_utils.broadcast_one_to_all(drawn))


def _digest(array: np.ndarray) -> list:
    """Four int32s of the array's bytes, shape and dtype."""
    array = np.ascontiguousarray(array)
    digest = hashlib.blake2b(str((array.shape, array.dtype.str)).encode(), digest_size=16)
    digest.update(memoryview(array).cast("B"))
    return list(np.frombuffer(digest.digest(), np.int32))


DATA_ADVICE = (
    "every process must be given the same data and fit arguments (each draws its own part of the same seeded "
    "global batch)",
    "Load the same arrays in every process and pass the same batch_size, steps_per_epoch, shuffle and seed.",
)
MODEL_ADVICE = (
    "every process must make and compile the same model (each runs the same step on its part of the batch, and "
    "nothing else keeps them the same)",
    "Make the model with the same arguments and call compile with the same optimizer, loss and arguments in "
    "every process.",
)


def _without_names(config: Any) -> Any:
    """A configuration without its `name` entries: Keras numbers layers' names per process
    (`dense_3`), which says nothing about the model the processes train."""
    if isinstance(config, dict):
        return {k: _without_names(v) for k, v in config.items() if k != "name"}
    if isinstance(config, (list, tuple)):
        return [_without_names(v) for v in config]
    return config


def _json(value: Any) -> str:
    """A value that may be anything a configuration may hold (a number's type named where it cannot be written)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return type(value).__name__


def model_fields(model: Any) -> dict:
    """`{field: the bytes of its configuration}` of the model's constructor arguments
    (`get_config`: the parts, lambda_max, the schedule, the method's own) and of `compile`'s
    (`get_compile_config`: the optimizer, the loss, the metrics, the part optimizers, ...),
    names left out: what `check_same_everywhere` compares between processes."""
    fields = {}
    for who, config in (("the model's", model.get_config()), ("compile's", model.get_compile_config() or {})):
        for key, value in _without_names(config).items():
            text = json.dumps(_without_names(value), sort_keys=True, default=_json)
            fields[f"{who} {key}"] = np.frombuffer(text.encode(), np.uint8)
    return fields


def check_same_everywhere(method: str, fields: dict, advice: tuple = DATA_ADVICE) -> None:
    """Every process must have been given the same `fields` (`{name: numbers or array}`: arrays by a
    digest of their bytes); a ValueError on every process names the fields that differ, and where.
    `advice`: `(what must agree, what to do)`, the message's two halves."""
    if current() is None:
        return
    import jax

    if jax.process_count() == 1:
        return
    from jax.experimental import multihost_utils

    # The fields' names first, in a row of fixed length: the rows below must have one length everywhere.
    names = np.frombuffer("\n".join(fields).encode(), np.uint8)
    everyone = np.asarray(multihost_utils.process_allgather(np.asarray(_digest(names), np.int32)))
    if (everyone != everyone[0]).any():
        raise ValueError(
            f"{method}.fit on {jax.process_count()} processes: {advice[0]}; the entries themselves differ "
            f"between processes (this one has: {', '.join(fields)}). {advice[1]}"
        )
    rows = {
        name: _digest(value) if isinstance(value, np.ndarray) else [int(v) for v in np.atleast_1d(value)]
        for name, value in fields.items()
    }
    flat = np.asarray([v for row in rows.values() for v in row], np.int32)
    gathered = np.asarray(multihost_utils.process_allgather(flat)).reshape(jax.process_count(), -1)
    differing, start = [], 0
    for name, row in rows.items():
        columns = gathered[:, start : start + len(row)]
        start += len(row)
        if (columns != columns[0]).any():
            differing.append(name)
    if differing:
        raise ValueError(
            f"{method}.fit on {jax.process_count()} processes: {advice[0]}; these differ between "
            f"processes: {', '.join(differing)}. {advice[1]}"
        )


def check_variables(model: Any, distribution: Any) -> None:
    """Every variable of the model (and of its optimizers and metrics) must have been made under the
    distribution: Keras places a variable when it is made, and cannot mix one device's with the mesh's."""
    devices = set(distribution.device_mesh.backend_mesh.devices.flat)
    variables = [*model.variables, *model.metrics_variables]
    if model.optimizer is not None:
        variables += list(model.optimizer.variables)
    for variable in variables:
        value = getattr(variable, "value", None)
        sharding = getattr(value, "sharding", None)
        if sharding is not None and set(sharding.device_set) != devices:
            raise ValueError(
                f"{model.METHOD}.fit under {type(distribution).__name__}: the model's variable "
                f"{variable.path!r} was made before the distribution was set (it lives on "
                f"{len(sharding.device_set)} device(s), the distribution spans {len(devices)}). Keras places "
                f"variables when they are made: call keras.distribution.set_distribution(...) before making "
                f"the model, its parts and its optimizers (or make them inside `with distribution.scope():`)."
            )


def check_arrays_across_processes(model: Any, call: str, x: Any) -> None:
    """`evaluate` and `predict` on arrays under a distribution of many processes: Keras' own takes only
    a tf.data.Dataset there (it splits one across the processes), and its message names no way out;
    this one says what works, before Keras is asked."""
    distribution = current()
    if distribution is None or hasattr(x, "element_spec") or not getattr(distribution, "auto_shard_dataset", False):
        return
    import jax

    if jax.process_count() == 1:
        return
    raise ValueError(
        f"{model.METHOD}.{call} on {jax.process_count()} processes: Keras' distribution takes only a "
        f"tf.data.Dataset here (it splits it across the processes), not arrays. On arrays, call the model on "
        f"the points in every process, in batches: keras.ops.convert_to_numpy(model(x[i : i + 1024], "
        f"training=False)) gives each process every prediction (the weights are the same everywhere), and a "
        f"metric is computed from those; or pass a tf.data.Dataset where TensorFlow is installed "
        f"(docs/distributed.md, 'After the fit')."
    )


@contextlib.contextmanager
def fit_scope(model: Any, own_batches: bool) -> Iterator[None]:
    """Around Keras' `fit`: the variables' check; with the model's own batches (`own_batches`), Keras'
    auto-sharding off for the fit, since every process already draws its share itself."""
    distribution = current()
    if distribution is None:
        yield
        return
    check_variables(model, distribution)
    check_same_everywhere(model.METHOD, model_fields(model), MODEL_ADVICE)
    before = getattr(distribution, "auto_shard_dataset", None)
    if own_batches and before:
        distribution.auto_shard_dataset = False
    try:
        yield
    finally:
        if own_batches and before:
            distribution.auto_shard_dataset = before
