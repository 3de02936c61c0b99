"""The Keras the package builds on: whichever one `tf.keras` is in this process.

* TensorFlow 2.15: Keras 2 (the `keras` 2.15 package that TensorFlow pins).
* TensorFlow 2.16+: Keras 3 (`keras`), or legacy Keras 2 (`tf_keras`) when
  TensorFlow is told to use it with TF_USE_LEGACY_KERAS=1.

Every module of the package that needs Keras imports it from here, so the
layer, the schedule callback, the demo and the serving export all use the
same one as the user's model. Code that needs a Keras 3-only API checks
`KERAS_3` first.
"""

from __future__ import annotations

from types import ModuleType

from grad_reverse._backend import legacy_keras_requested


def _load() -> ModuleType:
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


keras = _load()
KERAS_MAJOR = int(keras.__version__.split(".")[0])
KERAS_3 = KERAS_MAJOR >= 3
