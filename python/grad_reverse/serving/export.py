"""Exporting Keras models for TF Serving, and the layer's rule for direct calls."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

from grad_reverse.ops import LambdaLike, grad_reverse
from grad_reverse.serving.saved_model_dir import PathLike


def grad_reverse_or_identity(x, lambda_: LambdaLike = 1.0, *, training: bool | None = None, name: str | None = None):
    """The `GradReverse` layer's rule, for code that calls the op directly.

    Returns `x` itself when `training` is False (no op in the graph, so a
    serving function traced that way needs only stock TensorFlow ops);
    otherwise `grad_reverse(x, lambda_)`: identity forward, gradient
    `-lambda_ * dy`. Like the layer, `training=None` reverses gradients, so a
    training step that forgets to pass `training=True` still trains
    adversarially.

    Typical use: give the model's call a `training` argument, pass it here,
    and export a serving function that calls the model with `training=False`.

    Args:
      x: the tensor.
      lambda_: the gradient's factor, as `grad_reverse` takes it.
      training: False leaves the op out; True or None reverses gradients.
      name: the op's name, as `grad_reverse` takes it.
    """
    if training is False:
        return x
    return grad_reverse(x, lambda_, name=name)


def export_serving(
    model: Any,
    path: PathLike,
    *,
    input_signature: list | None = None,
    check: bool = True,
    verify: bool = False,
    verbose: bool = False,
) -> None:
    """Exports a Keras model for stock TF Serving: `model.export`, then `make_servable`.

    Raises TypeError for an object without `model.export` (a plain
    `tf.Module`: save it with `tf.saved_model.save` and call `make_servable`).

    The export is Keras' own (`model.export(path)`: the same `serve` and
    `serving_default` signatures, input names and inference-mode layers),
    written to a hidden folder beside `path` and rewritten into `path`
    with every `GradReverse` replaced by `Identity` (see `make_servable`).
    So it also works for models that call `grad_reverse()` directly. An
    existing SavedModel at `path` is replaced, as `model.export` would; any
    other non-empty directory there is refused (SavedModelError). The hidden
    folder of a run that was killed is removed by the next run for `path`,
    as make-servable's are.

    Args:
      model: a Keras model (anything with `model.export`).
      path: the SavedModel directory to write.
      input_signature: passed to `model.export` (its inputs' specs);
        default: what Keras infers from a built model.
      check: raise ValueError if a signature still needs an op stock TF
        Serving lacks (another library's custom op).
      verify: also run every signature of both exports and require
        bitwise-equal outputs (in a second process).
      verbose: print Keras' export summary and the rewriter's report.
    """
    from grad_reverse._keras import KERAS_3
    from grad_reverse.serving import staging as staging_folder
    from grad_reverse.serving.servable import make_servable

    if not callable(getattr(model, "export", None)):
        raise TypeError(
            f"export_serving exports a Keras model (it calls `model.export`), got "
            f"{type(model).__module__}.{type(model).__qualname__}, which has no `export`. For another "
            f"tf.Module: `tf.saved_model.save(module, src)`, then `make_servable(src, path)`."
        )
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    with staging_folder.claimed_sibling(target, staging_folder.KERAS_EXPORT, notes) as staging:
        if verbose:
            print("\n".join(notes), end="\n" if notes else "")
        exported = staging / "saved_model"
        if KERAS_3:
            # Keras 3.0 had neither keyword (`verbose` came in 3.1-3.2,
            # `input_signature` later): pass only what is asked for.
            options = {"verbose": verbose} if "verbose" in _export_parameters(model) else {}
            if input_signature is not None:
                options["input_signature"] = input_signature
            model.export(str(exported), **options)
        elif input_signature is None:
            # Keras 2's export has no `verbose` and prints its endpoints itself.
            with contextlib.nullcontext() if verbose else contextlib.redirect_stdout(io.StringIO()):
                model.export(str(exported))
        else:
            raise ValueError("export_serving: input_signature needs Keras 3 (model.export takes none in Keras 2)")
        report = io.StringIO()
        make_servable(exported, target, overwrite=True, verify=verify, check=check, out=report)
        if verbose:
            print(report.getvalue(), end="")


def _export_parameters(model: Any) -> frozenset:
    import inspect

    return frozenset(inspect.signature(model.export).parameters)
