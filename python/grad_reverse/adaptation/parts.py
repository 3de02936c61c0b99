"""The parts an adaptation model is built from (feature extractor, heads):
the checks at construction and compile, and how a head's last activation is
read, and the first build on one point. Used when a model is built,
compiled or starts a fit, never inside a training step."""

from __future__ import annotations

from typing import Any, Optional

import tensorflow as tf

from grad_reverse._keras import keras


def activation_name(head: Any) -> Optional[str]:
    """The name of the activation that produces `head`'s output, when it can be told."""
    activation = getattr(head, "activation", None)
    if activation is not None:
        return getattr(activation, "__name__", None)
    layers = getattr(head, "layers", None)
    return activation_name(layers[-1]) if layers else None


def tell_from_logits(method: str, label_head: Any, label_from_logits: Optional[bool]) -> tuple:
    """`(from_logits, activation)`: whether `label_head` outputs logits, told from its last activation
    unless `label_from_logits` says it; a ValueError naming what is accepted otherwise."""
    activation = activation_name(label_head)
    if label_from_logits is not None:
        return bool(label_from_logits), activation
    if activation not in ("linear", "softmax", "sigmoid"):
        raise ValueError(
            f"{method}.compile: {method} needs class probabilities from the label head, and cannot tell "
            f"whether it outputs logits or probabilities (its last activation is {activation!r}); accepted: "
            "a last activation of softmax, sigmoid (one unit) or linear (logits), or "
            "compile(label_from_logits=True or False)"
        )
    return activation == "linear", activation


def check_part(method: str, name: str, part: Any) -> Any:
    if not isinstance(part, keras.layers.Layer):
        raise TypeError(f"{method}: {name} must be a Keras model or layer, got {type(part).__name__}")
    return part


def build_on_one_point(model: Any, spec: tf.TensorSpec) -> None:
    """Calls `model` once on one zero point of `spec`, so Keras records single
    points (not training pairs) as its input (export, saving); first builds or
    checks the adversary's parts on that point's features."""
    shape = [1] + [1 if d is None else d for d in spec.shape[1:]]
    with model.distribute_strategy.scope():
        point = tf.zeros(shape, spec.dtype)
        # The adversary first: Keras warns when a model is built with parts still unbuilt.
        model._prepare_adversary(model.feature_extractor(point, training=False))
        if not model.built:
            model(point, training=False)
