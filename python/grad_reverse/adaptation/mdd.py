"""`MDD`: margin disparity discrepancy (Zhang et al., ICML 2019).

    features  = feature_extractor(x)
    label     = label_head(features)                                # what the model predicts
    adversary = adversarial_head(GradReverse(lambda_)(features))    # training only

The adversarial head is a copy of the label head's architecture (fresh
weights) unless one is passed. Classification form, with `h(x)` the label
head's predicted class (no gradient) and `p'` the adversary's probabilities:

    transfer = margin * mean_source(-log p'_h(x))  -  mean_target(log(1 - p'_h(x) + 1e-6), clipped at 0)
    objective = label loss + trade_off * transfer

The adversarial head minimizes `transfer` (agree with the label head on the
source, disagree on the target); behind the reversal, the feature extractor
maximizes it. Regression form: both disparities are the mean absolute
difference of the adversary's output from the label head's (no gradient).
These are Transfer-Learning-Library's `ClassificationMarginDisparityDiscrepancy`
and `RegressionMarginDisparityDiscrepancy` (negated: TLlib trains `-mdd`),
with the source and target means taken separately, so the shares may differ.
Gradients, as TLlib's: the label head gets none from `transfer` (`h(x)` is an
argmax; the regression form's label output is taken without gradient); the
adversarial head gets `trade_off` times its gradient; the features the same
through the adversary, reversed and scaled by lambda. The adversary's output
is read as the label head's is, so its last activation must be the same.

The default lambda schedule is TLlib's curve over its reference training,
stretched to each fit: TLlib's warm start to 0.1 with steepness 1 over 1000
steps, in its 20,000-step trainings, is `0.1 * (2 / (1 + exp(-20 p)) - 1)` at
progress `p`; here the ramp over the fit's progress with gamma 20 (0.0987 a
quarter into the fit). TLlib's fixed horizon stays available:
`lambda_schedule="warm_start", gamma=1, warm_start_steps=1000`.
"""

from __future__ import annotations

from typing import Any

from grad_reverse._keras import keras
from grad_reverse.adaptation.model import AdversarialModel
from grad_reverse.adaptation.networks import (
    activation_name,
    check_no_reversal,
    check_part,
    class_log_probabilities,
    tell_from_logits,
)
from grad_reverse.backend_ops import ops, reverse
from grad_reverse.schedule import finite

FORMS = ("classification", "regression")
DEFAULT_MARGINS = {"classification": 4.0, "regression": 1.0}  # TLlib's
SHIFT = 1e-6  # inside log(1 - p'), as TLlib's shift_log


def copy_of(label_head: Any) -> Any:
    """A fresh head of `label_head`'s architecture (new weights), or a ValueError saying how to pass one."""
    try:
        if isinstance(label_head, keras.Model):
            return keras.models.clone_model(label_head)
        return label_head.__class__.from_config(label_head.get_config())
    except (NotImplementedError, TypeError, ValueError, AttributeError) as error:
        raise ValueError(
            "MDD: cannot copy the label head's architecture for the adversarial head "
            f"({type(error).__name__}: {error}); pass one: MDD(..., adversarial_head=<a Keras "
            "model with the label head's output shape>)"
        ) from error


def check_same_activation(label_head: Any, adversarial_head: Any) -> None:
    """A ValueError when the adversarial head's last activation is known and differs from the label
    head's: its output is decoded as the label head's (softmax, logits, one sigmoid unit)."""
    label, adversary = activation_name(label_head), activation_name(adversarial_head)
    if label is not None and adversary is not None and label != adversary:
        raise ValueError(
            f"MDD: the adversarial head's last activation is {adversary!r} but the label head's is {label!r}; "
            "its output is read as the label head's (probabilities or logits), so it must end the same way: "
            f"pass an adversarial head whose last activation is {label!r} (or none: a copy of the label head)"
        )


def classification_disparities(log_p: Any, log_p_adv: Any, n_source: Any) -> tuple:
    """Per point: the source's `-log p'_h(x)` and the target's `log(1 - p'_h(x) + 1e-6)` (<= 0)."""
    prediction = ops.expand_dims(ops.argmax(log_p, axis=-1), -1)
    taken = ops.take_along_axis(log_p_adv, prediction, axis=1)[:, 0]
    source = -taken[:n_source]
    target = ops.log(ops.minimum(1.0 - ops.exp(taken[n_source:]) + SHIFT, 1.0))
    return source, target


def regression_disparities(y: Any, y_adv: Any, n_source: Any) -> tuple:
    """Per point: the mean absolute difference of the adversary's output from the label head's."""
    difference = ops.abs(ops.cast(y_adv, "float32") - ops.stop_gradient(ops.cast(y, "float32")))
    per_point = ops.mean(ops.reshape(difference, [ops.shape(difference)[0], -1]), axis=-1)
    return per_point[:n_source], per_point[n_source:]


@keras.saving.register_keras_serializable(package="grad_reverse")
class MDD(AdversarialModel):
    """Margin disparity discrepancy training of `label_head(feature_extractor(x))`.

    Args:
      feature_extractor: points -> features.
      label_head: features -> class scores (softmax probabilities, logits,
        or one sigmoid unit, worked as two classes), or regression outputs.
      adversarial_head: the adversary, features -> the label head's output
        shape; default: a copy of the label head's architecture.
      margin: the margin factor gamma (> 0; TLlib's default 4 for
        classification, 1 for regression).
      trade_off: eta, the transfer term's weight in the objective.
      form: `"classification"` or `"regression"`.
      lambda_max, gamma, lambda_schedule, warm_start_steps: the reversal's
        schedule (see `grad_reverse.schedule`); default the ramp to 0.1 over the
        fit's progress with gamma 20 (TLlib's warm start over its 20,000 steps).
      **kwargs: Keras' `Model` arguments (`name`, ...).

    Attributes:
      form: the form it was made with, `"classification"` or `"regression"`.

    `compile(optimizer, loss, metrics, part_optimizers=..., label_from_logits=...)`;
    parts with their own optimizer: `feature_extractor`, `adversarial_head`.
    The History has `loss`, the label metrics, `transfer_loss` and `lambda`.
    """

    METHOD = "MDD"
    PARTS = ("feature_extractor", "label_head", "adversarial_head")
    OWN_OPTIMIZER_PARTS = ("feature_extractor", "adversarial_head")
    METRIC_NAMES = ("transfer_loss",)

    def __init__(
        self,
        feature_extractor: Any,
        label_head: Any,
        adversarial_head: Any = None,
        *,
        margin: float | None = None,
        trade_off: float = 1.0,
        form: str = "classification",
        lambda_max: float = 0.1,
        gamma: float = 20.0,
        lambda_schedule: str = "paper",
        warm_start_steps: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            lambda_max=lambda_max,
            gamma=gamma,
            lambda_schedule=lambda_schedule,
            warm_start_steps=warm_start_steps,
            **kwargs,
        )
        if form not in FORMS:
            raise ValueError(f"MDD: form must be one of {FORMS}, got {form!r}")
        margin = DEFAULT_MARGINS[form] if margin is None else finite("MDD: margin", margin)
        if margin <= 0.0:
            raise ValueError(
                f"MDD: margin (the margin factor gamma) must be > 0, got {margin}; "
                "the paper and TLlib use 4 (classification), 1 for regression"
            )
        self.feature_extractor = check_part("MDD", "feature_extractor", feature_extractor)
        self.label_head = check_part("MDD", "label_head", label_head)
        if adversarial_head is None:
            adversarial_head = copy_of(label_head)
        self.adversarial_head = check_no_reversal(
            "MDD", "adversarial head", check_part("MDD", "adversarial_head", adversarial_head)
        )
        if form == "classification":
            check_same_activation(label_head, self.adversarial_head)
        self.margin = margin
        self.trade_off = finite("MDD: trade_off", trade_off)
        self.form = form
        self._label_from_logits = False
        self._label_activation: str | None = None

    # --- compile -----------------------------------------------------------------------

    def compile(self, *args: Any, label_from_logits: bool | None = None, **kwargs: Any) -> None:
        """Keras' `compile` and `part_optimizers`, and whether the label head outputs logits.

        Args:
          *args: Keras' positional `compile` arguments: `optimizer`, `loss`, `metrics`.
          label_from_logits: (classification) whether the label head outputs
            logits; None: told from its last activation (linear: logits;
            softmax or sigmoid: probabilities).
          **kwargs: `part_optimizers` (`{"feature_extractor": ...,
            "adversarial_head": ...}`: an optimizer, or a learning-rate
            scale of the model's) and Keras' keyword `compile` arguments.
        """
        super().compile(*args, label_from_logits=label_from_logits, **kwargs)

    def _method_compile_keys(self) -> tuple:
        return ("label_from_logits",)

    def _method_compile(self, label_from_logits: bool | None = None) -> None:
        if self.form == "classification":
            self._label_from_logits, self._label_activation = tell_from_logits(
                "MDD", self.label_head, label_from_logits
            )

    def _method_compile_arguments(self) -> dict:
        return {"label_from_logits": self._label_from_logits if self.form == "classification" else None}

    def _adversarial_weight(self) -> float:
        return self.trade_off

    # --- the training step -------------------------------------------------------------

    def _adversarial_step(self, features: Any, n_source: Any, lambda_: Any) -> tuple:
        y_all = self.label_head(features, training=True)
        y_adv = self.adversarial_head(reverse(features, lambda_), training=True)
        if self.form == "classification":
            log_p = class_log_probabilities("MDD", y_all, self._label_from_logits, self._label_activation)
            log_p_adv = class_log_probabilities("MDD", y_adv, self._label_from_logits, self._label_activation)
            source, target = classification_disparities(log_p, log_p_adv, n_source)
        else:
            source, target = regression_disparities(y_all, y_adv, n_source)
        transfer = self.margin * ops.mean(source) - ops.mean(target)
        return y_all[:n_source], transfer, {"transfer_loss": transfer}

    def _prepare_adversary(self, features: Any) -> None:
        """Builds an unbuilt adversarial head on the features; it must give the label head's output shape."""
        label_output = self.label_head(features, training=False)
        if self.form == "classification":  # refused here, before any step, as in the step itself
            class_log_probabilities("MDD", label_output, self._label_from_logits, self._label_activation)
        label_shape = tuple(label_output.shape)
        adversary_shape = tuple(self.adversarial_head(features, training=False).shape)
        if label_shape != adversary_shape:
            raise ValueError(
                f"MDD: the adversarial head must give the label head's output shape {label_shape}, "
                f"got {adversary_shape}"
            )

    # --- saving ------------------------------------------------------------------------

    def _method_config(self) -> dict[str, Any]:
        return {"margin": self.margin, "trade_off": self.trade_off, "form": self.form}
