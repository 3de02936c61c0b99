"""Per-part optimizers of a `DANN`, `CDAN` or `MDD` model: the feature extractor
and the adversary (the domain head; MDD's adversarial head) may train with their own optimizer, or with the model's
optimizer at a scaled learning rate; the label head always trains with the
model's optimizer (`compile(optimizer=...)`).

Ganin et al. (JMLR 2016, §5.2.2) train the pretrained feature layers of
their Office experiments at a tenth of the new layers' rate; ADAPT offers
`optimizer_enc` / `optimizer_disc`. Here that is

    model.compile(optimizer, loss, part_optimizers={"feature_extractor": 0.1})

A number is a learning-rate scale: the part gets a copy of the model's
optimizer (same class and settings, its own state) whose learning rate is
the model's times the number at every step, a schedule included
(`ScaledLearningRate`). Anything else is an optimizer as `compile` takes
one (an instance, a name, a config).

A part's scaled rate follows the model's rate at every step, a schedule
included (`grad_reverse.schedule.ScaledLearningRate`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from grad_reverse._keras import keras
from grad_reverse.adaptation.training import keras_compat
from grad_reverse.backend_ops import strategy_scope
from grad_reverse.schedule import ScaledLearningRate

# The parts that may have their own optimizer, as named in `part_optimizers`.
PARTS = ("feature_extractor", "domain_head")


def _scale(part: str, value: Any, method: str) -> float:
    scale = float(value)
    if not math.isfinite(scale) or scale < 0.0:
        raise ValueError(
            f"{method}.compile: part_optimizers[{part!r}]: a learning-rate scale must be a finite "
            f"number >= 0, got {value!r}"
        )
    return scale


def scaled_copy(optimizer: Any, scale: float, name: str, method: str = "DANN") -> Any:
    """A fresh optimizer of `optimizer`'s class and settings, its learning rate times `scale`
    (`method`: the model class that compiles, named in the error)."""
    config = dict(optimizer.get_config(), name=name)
    if "learning_rate" not in config:
        raise ValueError(
            f"{method}.compile: a learning-rate scale needs a model optimizer with a learning_rate in "
            f"its config; {type(optimizer).__name__} has none: give the part its own optimizer"
        )
    learning_rate = config["learning_rate"]
    if isinstance(learning_rate, dict):  # a serialized schedule
        config["learning_rate"] = ScaledLearningRate(keras.optimizers.schedules.deserialize(learning_rate), scale)
    else:
        config["learning_rate"] = float(learning_rate) * scale
    return optimizer.__class__.from_config(config)


def make_part_optimizers(
    spec: Mapping[str, Any] | None, model_optimizer: Any, parts: tuple = PARTS, method: str = "DANN"
) -> dict[str, Any]:
    """`compile`'s `part_optimizers` as `{part: optimizer}`, checked before any step.

    Refused: a part that does not exist or cannot have its own optimizer,
    a scale that is not a finite number >= 0, a value that is no optimizer,
    and mixed precision's loss scaling (each optimizer would scale alone).
    """
    if spec is None:
        return {}
    if not isinstance(spec, Mapping):
        raise TypeError(
            f"{method}.compile: part_optimizers must be a dict {{part name: optimizer or learning-rate "
            f"scale}}, got {spec!r}"
        )
    if spec and isinstance(model_optimizer, keras.mixed_precision.LossScaleOptimizer):
        raise ValueError(
            f"{method}.compile: part_optimizers do not work with mixed precision's loss scaling "
            "(mixed_float16) yet: train every part with the model's optimizer, or use float32 "
            "or mixed_bfloat16"
        )
    optimizers = {}
    for part, value in spec.items():
        if part not in parts:
            why = (
                " (the label head trains with the model's optimizer, compile's `optimizer`)"
                if part == "label_head"
                else ""
            )
            raise ValueError(
                f"{method}.compile: part_optimizers has no part {part!r}{why}; "
                f"the parts with their own optimizer are {parts}"
            )
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            optimizers[part] = scaled_copy(model_optimizer, _scale(part, value, method), f"{part}_optimizer", method)
        else:
            try:
                optimizers[part] = keras.optimizers.get(value)
            except (ValueError, TypeError) as error:
                raise ValueError(
                    f"{method}.compile: part_optimizers[{part!r}] must be a Keras optimizer (an instance, "
                    f"a name or a config) or a learning-rate scale (a number), got {value!r}"
                ) from error
    return optimizers


def optimizer_groups(model: Any, part_optimizers: Mapping[str, Any]) -> list:
    """`[(optimizer, variables)]`: each part in `part_optimizers` with its own optimizer, then
    the model's optimizer with every other trainable variable (the label head's, and the
    parts' without an optimizer of their own)."""
    groups, owned = [], set()
    for part, optimizer in part_optimizers.items():
        variables = list(getattr(model, part).trainable_variables)
        groups.append((optimizer, variables))
        owned.update(id(v) for v in variables)
    groups.append((model.optimizer, [v for v in model.trainable_variables if id(v) not in owned]))
    return groups


def build_every_optimizer(model: Any, part_optimizers: Mapping[str, Any]) -> None:
    """Builds every optimizer's state before the first step (and before a saved state loads).

    The model's optimizer is built on every trainable variable, as Keras
    does: with `use_ema` it averages (and at the end of `fit` replaces)
    every weight, whichever optimizer moved it.
    """
    groups = [(model.optimizer, model.trainable_variables)] + optimizer_groups(model, part_optimizers)[:-1]
    with strategy_scope(model):
        for optimizer, variables in groups:
            # Keras 2's legacy optimizers (optimizer_v2) have no build: they make their slots on the first step.
            if hasattr(optimizer, "build") and not keras_compat.optimizer_built(optimizer):
                optimizer.build(variables)
