"""Serving models that use GradReverse with stock TensorFlow Serving.

Stock TF Serving (`tensorflow_model_server`) cannot load op libraries, so a
serving signature that contains `GradReverse` fails there with "Op type not
registered 'GradReverse'". Forward, the op is the identity, so inference
graphs do not need it:

* `make_servable(src, dst)` (`python -m grad_reverse make-servable SRC DST`)
  copies any SavedModel with `GradReverse` replaced by `Identity`, then
  proves the copy: stock ops only, bitwise-equal outputs (servable.py).
* `check_serving(path)` (`python -m grad_reverse check-serving PATH`) lists
  the op types each serving signature runs and fails, naming them, if any is
  not a stock TensorFlow op (check.py).
* `export_serving(model, path)`: `model.export` plus `make_servable`
  (export.py).
* `grad_reverse_or_identity(x, lambda_, training=...)`: the layer's rule for
  code that calls the op directly (export.py).

Modules: constants (shared names; imports nothing), saved_model_dir
(reading/validating/writing the directory), rewrite (the graph edit), verify
and signature_runner (the bitwise proof), staging (DST's hidden work folders,
and the stale ones of killed runs), destination (whether DST may be written,
without TensorFlow), check, servable, export, cli. Names
below load their module on first use, so `add_cli` (argparse only) is cheap
to import.
"""

from __future__ import annotations

import importlib
from typing import Any

from grad_reverse._keras import require_tensorflow_backend
from grad_reverse.serving.cli import add_cli, main
from grad_reverse.serving.constants import SERVING_TAG

_LAZY = {
    "NEEDS_PYTHON": "check",
    "check_serving": "check",
    "non_stock_op_types": "check",
    "signature_op_types": "check",
    "stock_op_types": "check",
    "export_serving": "export",
    "grad_reverse_or_identity": "export",
    "SavedModelError": "saved_model_dir",
    "read_saved_model": "saved_model_dir",
    "NotServableError": "servable",
    "ServableReport": "servable",
    "UnverifiedError": "servable",
    "make_servable": "servable",
}

__all__ = ["SERVING_TAG", "add_cli", "main", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        # Its modules import TensorFlow: on Keras' JAX or PyTorch backend, say so first.
        require_tensorflow_backend(f"grad_reverse.serving.{name}")
        value = getattr(importlib.import_module(f"grad_reverse.serving.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'grad_reverse.serving' has no attribute '{name}'")


def __dir__() -> list:
    return sorted(set(globals()) | set(_LAZY))
