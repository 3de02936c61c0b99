"""Where Keras 2 (TensorFlow 2.15, tf-keras) and Keras 3 differ for the
adversarial models, outside the training step (the step's differences sit in
`model.py`, beside the step, so one file shows it whole):

* the `loss` metric's tracker: Keras 3's `Model._loss_tracker` (a private
  attribute, present from Keras 3.0 to at least 3.15; tested in
  tests/adaptation/test_dann_model.py), Keras 2's first compiled-loss metric;
* whether an optimizer has built its state;
* Keras 3's `compile_from_config` skips a custom `compile()`; `DANN`
  restores its compile arguments itself (`compile_arguments`).
"""

from __future__ import annotations

from typing import Any

from grad_reverse._keras import KERAS_3, keras


def optimizer_built(optimizer: Any) -> bool:
    """Whether `optimizer` has built its state (slots) already."""
    return bool(getattr(optimizer, "built" if KERAS_3 else "_built", False))


def label_loss_tracker(model: Any) -> Any:
    """The metric behind the `loss` log entry (for tests of this module)."""
    if KERAS_3:
        return model._loss_tracker
    return model.compiled_loss.metrics[0]


def compile_arguments(config: dict) -> dict:
    """`get_compile_config()`'s dict back as `compile()` keyword arguments."""
    return keras.saving.deserialize_keras_object(config)


def serialize(obj: Any) -> Any:
    return keras.saving.serialize_keras_object(obj)


_BACKEND_MODULES = "keras.src.backend."


def portable(config: Any) -> Any:
    """A compile config that loads on every Keras backend: Keras 3 records an optimizer made on
    PyTorch under its backend's own class (module `keras.src.backend.torch.optimizers.torch_adam`),
    which other backends cannot import; a built-in optimizer is recorded as `keras.optimizers`'
    instead, which each backend makes its own."""
    if isinstance(config, dict):
        config = {key: portable(value) for key, value in config.items()}
        module, name = config.get("module"), config.get("class_name")
        if isinstance(module, str) and module.startswith(_BACKEND_MODULES) and hasattr(keras.optimizers, str(name)):
            config["module"] = "keras.optimizers"
        return config
    if isinstance(config, (list, tuple)):
        return type(config)(portable(value) for value in config)
    return config


def deserialize(config: Any) -> Any:
    return keras.saving.deserialize_keras_object(config)
