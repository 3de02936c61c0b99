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
        import tf_keras

        return tf_keras
    import keras as module

    return module


keras = _load()
KERAS_MAJOR = int(keras.__version__.split(".")[0])
KERAS_3 = KERAS_MAJOR >= 3
