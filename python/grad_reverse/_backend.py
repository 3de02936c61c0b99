"""Which Keras backend this process runs, asked without importing TensorFlow
unless Keras runs on it.

On TensorFlow the package is the native op and everything built on it; on
Keras 3's JAX and PyTorch backends it is the `GradReverse` layer alone
(`grad_reverse.backend_layer`), and asking for a TensorFlow-only part raises
`tensorflow_only(...)`, which says so.

Nothing here imports TensorFlow; `keras_backend()` imports Keras, which
imports TensorFlow only when that is its backend.
"""

from __future__ import annotations

import os

TENSORFLOW = "tensorflow"
GUIDE = "docs/keras-backends.md"


def legacy_keras_requested() -> bool:
    """TensorFlow's own switch for tf.keras 2 (tf-keras) on TensorFlow 2.16+."""
    return os.environ.get("TF_USE_LEGACY_KERAS", "").strip().lower() in ("1", "true", "yes")


def keras_backend() -> str:
    """The backend Keras runs on in this process: "tensorflow", "jax", "torch"...

    "tensorflow" also when Keras 2 is in use (legacy tf.keras, or TensorFlow
    2.15's Keras), and when Keras cannot be imported at all: the TensorFlow
    path's own import then says what is missing (TensorFlow, or Keras).
    """
    if legacy_keras_requested():
        return TENSORFLOW
    try:
        import keras
    except ImportError:  # Keras 3 on its TensorFlow backend without TensorFlow, or no Keras
        return TENSORFLOW
    backend = getattr(getattr(keras, "backend", None), "backend", None)
    return backend() if callable(backend) else TENSORFLOW


class TensorFlowOnly(ImportError):
    """A part of the package that needs the TensorFlow backend, asked for on another."""


def tensorflow_only(what: str, backend: str) -> TensorFlowOnly:
    """The error for `what` (a public name, a module) asked for while Keras runs on `backend`."""
    return TensorFlowOnly(
        f"{what} needs Keras on TensorFlow, and Keras runs on {backend} in this process (KERAS_BACKEND). "
        "On JAX and PyTorch the package is the GradReverse layer alone (`from grad_reverse import GradReverse`); "
        "the native op and everything built on it (grad_reverse.grad_reverse, DANN, CDAN, MDD, the lambda "
        f"schedule, serving, the command line) need KERAS_BACKEND=tensorflow with TensorFlow installed: {GUIDE}."
    )


def require_tensorflow_backend(what: str) -> None:
    """Raises `tensorflow_only(what, ...)` unless Keras runs on TensorFlow."""
    backend = keras_backend()
    if backend != TENSORFLOW:
        raise tensorflow_only(what, backend)
