"""Which Keras backend this process runs, and which Keras the package builds on.

The backend is asked without importing TensorFlow unless Keras runs on it.
On TensorFlow the package is the native op and everything built on it; on
Keras 3's JAX and PyTorch backends it is the `GradReverse` layer
(`grad_reverse.backend_layer`), the models and the schedules, and asking for
a TensorFlow-only part (the op, serving, the command line) raises
`tensorflow_only(...)`, which says so.

The Keras (`keras`, `KERAS_MAJOR`, `KERAS_3`, imported at their first use,
so that this module itself imports nothing): whichever one `tf.keras` is in
this process.

* TensorFlow 2.15: Keras 2 (the `keras` 2.15 package that TensorFlow pins).
* TensorFlow 2.16+: Keras 3 (`keras`), or legacy Keras 2 (`tf_keras`) when
  TensorFlow is told to use it with TF_USE_LEGACY_KERAS=1.

Every module of the package that needs Keras imports it from here, so the
layer, the schedule callback, the demo and the serving export all use the
same one as the user's model. Code that needs a Keras 3-only API checks
`KERAS_3` first.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

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
        "On JAX and PyTorch the package has the GradReverse layer, the models DANN, CDAN and MDD and the "
        "schedules; the native op and what drives it (grad_reverse.grad_reverse, BUILD_INFO, SUPPORTED_DTYPES, "
        "reference, serving, the command line) need KERAS_BACKEND=tensorflow with TensorFlow installed: "
        f"{GUIDE}."
    )


def require_tensorflow_backend(what: str) -> None:
    """Raises `tensorflow_only(what, ...)` unless Keras runs on TensorFlow."""
    backend = keras_backend()
    if backend != TENSORFLOW:
        raise tensorflow_only(what, backend)


def _load_keras() -> ModuleType:
    if legacy_keras_requested():
        try:
            import tf_keras
        except ModuleNotFoundError as error:
            if error.name != "tf_keras":
                raise
            raise ImportError(_no_tf_keras_message()) from None
        return tf_keras
    import keras as module

    return module


def _no_tf_keras_message() -> str:
    import tensorflow as tf

    release = ".".join(tf.__version__.split(".")[:2])
    return (
        f"grad_reverse: TF_USE_LEGACY_KERAS=1 asks for legacy Keras 2 (the tf-keras package), which is "
        f"not installed here. Install the tf-keras of this TensorFlow's release: "
        f'`pip install --no-deps "tf-keras=={release}.*"` (TensorFlow {tf.__version__}); if pip finds '
        f"none, tf-keras has not been published for TensorFlow {release} yet (it follows TensorFlow's "
        f"final releases, none for a release candidate or a nightly): unset TF_USE_LEGACY_KERAS to use "
        f"Keras 3, or install a TensorFlow release that has a tf-keras."
    )


_LAZY = ("keras", "KERAS_MAJOR", "KERAS_3")


def __getattr__(name: str) -> Any:
    """`keras`, `KERAS_MAJOR` and `KERAS_3`, bound at the first use of any."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = _load_keras()
    major = int(module.__version__.split(".")[0])
    globals().update(keras=module, KERAS_MAJOR=major, KERAS_3=major >= 3)
    return globals()[name]
