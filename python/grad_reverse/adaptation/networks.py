"""The networks an adaptation model is built from (feature extractor, heads):
the checks at construction and compile, how a head's last activation is
read (`heads`), the first build on one point, and a label head's output as class
log-probabilities (CDAN's conditioning, MDD's disparity, inside the step)."""

from __future__ import annotations

from typing import Any

from grad_reverse._keras import keras
from grad_reverse.adaptation.heads import activation_name
from grad_reverse.backend_ops import in_replica_context, ops, rank, strategy_scope


def tell_from_logits(method: str, label_head: Any, label_from_logits: bool | None) -> tuple:
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


def _layers_within(part: Any) -> list:
    """`part` and every layer nested in it (models inside models included)."""
    flatten = getattr(part, "_flatten_layers", None)
    if flatten is None:
        return [part]
    return list(flatten(include_self=True, recursive=True))


def check_no_reversal(method: str, name: str, part: Any) -> Any:
    """`part`, or a ValueError when it holds a `GradReverse` layer: the model reverses the
    gradient between the features and this part already, and two reversals cancel (the
    features would learn to help the adversary instead of fooling it)."""
    for layer in _layers_within(part):
        # By name: the op's layer (TensorFlow) or the JAX/PyTorch one, or a subclass of either.
        if any(cls.__name__ == "GradReverse" for cls in type(layer).__mro__):
            raise ValueError(
                f"{method}: the {name} must not contain a GradReverse layer (found {layer.name!r}): "
                f"{method} puts one between the features and the {name} itself, and a second one "
                f"cancels it. Pass the {name} without it."
            )
    return part


def build_on_one_point(model: Any, spec: tuple) -> None:
    """Calls `model` once on one zero point of `spec` (`(shape of a batch, dtype)`), so Keras
    records single points (not training pairs) as its input (export, saving); first builds or
    checks the adversary's parts on that point's features."""
    shape, dtype = spec
    shape = [1] + [1 if d is None else int(d) for d in list(shape)[1:]]
    with strategy_scope(model):
        point = ops.zeros(shape, dtype)
        # The adversary first: Keras warns when a model is built with parts still unbuilt.
        model._prepare_adversary(model.feature_extractor(point, training=False))
        if not model.built:
            model(point, training=False)


def remember_points(model: Any, inputs: Any) -> None:
    """Keeps the spec of one point of the first `inputs` the model is called on (a tensor), so
    `build_unbuilt_parts` can later build the parts that call did not (the adversary's)."""
    if getattr(model, "_point_spec", None) is None and hasattr(inputs, "shape") and hasattr(inputs, "dtype"):
        shape = list(inputs.shape)
        if shape:
            model._point_spec = ((1, *shape[1:]), dtype_name(inputs.dtype))


def dtype_name(dtype: Any) -> str:
    """A tensor's dtype by name ("float32"), whatever the backend."""
    standardize = getattr(keras.backend, "standardize_dtype", None)  # Keras 3
    return standardize(dtype) if standardize is not None else dtype.name


def build_adversary_on(model: Any, features: Any) -> None:
    """Builds the adversary on `features` while it is unbuilt (the model's first call, when the
    parts have no keras.Input), so that `build_optimizers` sees every weight; inside
    `strategy.run` it is left to `build_optimizers`."""
    if not in_replica_context() and not all(getattr(model, part).built for part in model.PARTS):
        with strategy_scope(model):
            model._prepare_adversary(features)


def build_unbuilt_parts(model: Any, caller: str | None) -> None:
    """Builds the parts that calling the model did not build (its adversary) on one point of what it
    was called on. A part still unbuilt (the model was never called) is a RuntimeError naming
    `caller` and saying how to build it; with `caller` None, it is left unbuilt."""
    unbuilt = [part for part in model.PARTS if not getattr(model, part).built]
    spec = getattr(model, "_point_spec", None)
    if unbuilt and spec is not None:
        build_on_one_point(model, spec)
        unbuilt = [part for part in model.PARTS if not getattr(model, part).built]
    if unbuilt and caller is not None:
        raise RuntimeError(
            f"{model.METHOD}.{caller}: {', '.join(unbuilt)} not built yet (its weights do not exist, so no "
            f"optimizer can be built for them). Build the model first: call it on a batch of points, "
            f"model(x[:1]) (under the strategy's scope, if any), or give each part a keras.Input; then "
            f"call {caller}()."
        )


# Clips probabilities before the log (a head's softmax may give exact 0).
_TINY = 1e-12


def class_log_probabilities(method: str, y: Any, from_logits: bool, activation: str | None) -> Any:
    """Log-probabilities [batch, classes] (float32) from a label head's output `y` [batch, units]
    (CDAN's conditioning, MDD's disparity).

    Probabilities when the head's last activation is softmax (or sigmoid on one
    unit), logits when it is linear. One unit is a binary task: P(class 1) = p
    (or sigmoid(logit)), worked as the two classes `[1 - p, p]`. Several sigmoid
    units are refused: they are independent labels, not one distribution.
    """
    if rank(y.shape) != 2 or y.shape[-1] is None:
        raise ValueError(
            f"{method}: the label head must output [batch, classes] (one unit for a binary task) "
            f"to give class probabilities, got shape {tuple(y.shape)}"
        )
    y = ops.cast(y, "float32")
    units = y.shape[-1]
    if units == 1:
        if from_logits:
            return ops.concatenate([ops.log_sigmoid(-y), ops.log_sigmoid(y)], axis=-1)
        return ops.log(ops.clip(ops.concatenate([1.0 - y, y], axis=-1), _TINY, 1.0))
    if activation == "sigmoid" and not from_logits:
        raise ValueError(
            f"{method}: a label head with {units} sigmoid units gives independent labels, not class "
            "probabilities; accepted: softmax over the classes, one sigmoid unit (binary), or logits"
        )
    if from_logits:
        return ops.log_softmax(y, axis=-1)
    return ops.log(ops.clip(y, _TINY, 1.0))
