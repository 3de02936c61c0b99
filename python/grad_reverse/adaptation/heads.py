"""How a head's last activation is read (no TensorFlow: the validators use it on every backend)."""

from __future__ import annotations

from typing import Any


def activation_name(head: Any) -> str | None:
    """The name of the activation that produces `head`'s output, when it can be told."""
    activation = getattr(head, "activation", None)
    if activation is not None:
        return getattr(activation, "__name__", None)
    layers = getattr(head, "layers", None)
    return activation_name(layers[-1]) if layers else None
