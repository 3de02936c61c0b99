"""`DomainHeadModel`: what `DANN` and `CDAN` share, a domain head that tells
source (label 0) from target (label 1) behind GradReverse, its loss and its
compile arguments (`domain_loss`, `domain_loss_weight`, `domain_from_logits`,
`domain_loss_reduction`).

The domain term of the objective: Ganin et al. (JMLR 2016, §4, the objective
E and Algorithm 1) weigh the domain classifier's loss as the mean over the
source points PLUS the mean over the target points:

    label loss (mean over the source points)
      + domain_loss_weight * (mean domain loss over the source points
                              + mean domain loss over the target points)

`DOMAIN_LOSS_REDUCTIONS` names the two ways to reduce the per-point domain
losses of a batch:

* `"sum_over_domains"` (the default): the paper's sum of the two means, for
  any split of the batch; each domain counts the same whatever its share.
* `"mean_over_domains"` (CDAN's default): half the paper's term,
  `0.5 * (source mean + target mean)`, for any split: CDAN's authors' scale
  (their binary cross-entropy's mean over half/half batches, and half the
  sum of CDAN+E's per-domain weighted means) and Transfer-Learning-Library's
  `DomainAdversarialLoss`.
* `"mean_over_batch"`: one mean over all the batch's points. With half/half
  batches it equals `"mean_over_domains"`; with other splits each domain
  counts by its share of the batch.

Which gradient reaches which part (as in the authors' code): the domain head
gets `domain_loss_weight` times the term's gradient; the features the same
through the domain head, reversed and scaled by lambda; the label head none
(DANN), or only through CDAN+E's entropy weights (`cdan.py`).
CDAN's per-point weights (CDAN+E) are CDAN's own (`cdan.weighted_domain_term`).
"""

from __future__ import annotations

from typing import Any

from grad_reverse._keras import keras
from grad_reverse.adaptation.model import AdversarialModel
from grad_reverse.adaptation.networks import activation_name, check_no_reversal, check_part
from grad_reverse.backend_ops import ops, rank, reverse
from grad_reverse.schedule import finite

SUM_OVER_DOMAINS = "sum_over_domains"
MEAN_OVER_DOMAINS = "mean_over_domains"
MEAN_OVER_BATCH = "mean_over_batch"
DOMAIN_LOSS_REDUCTIONS = (SUM_OVER_DOMAINS, MEAN_OVER_DOMAINS, MEAN_OVER_BATCH)


def check_reduction(reduction: str, method: str) -> str:
    """`reduction` if it is one of `DOMAIN_LOSS_REDUCTIONS`; ValueError naming them otherwise."""
    if reduction not in DOMAIN_LOSS_REDUCTIONS:
        raise ValueError(
            f"{method}.compile: domain_loss_reduction must be one of {DOMAIN_LOSS_REDUCTIONS}, got {reduction!r}"
        )
    return reduction


def per_point_losses(loss_values: Any, method: str) -> Any:
    """The domain loss function's output as one float32 value per point (shape [batch]).

    A loss that already reduced over the batch (a scalar) cannot be split
    into its source and target means: refused when the step is traced.
    """
    shape = loss_values.shape
    if rank(shape) not in (1, 2) or (rank(shape) == 2 and shape[-1] not in (1, None)):
        raise ValueError(
            f"{method}: the domain loss must return one loss per point (shape [batch]), got shape "
            f"{tuple(shape)}; pass a Keras loss or a function (y_true, y_pred) -> per-point losses"
        )
    return ops.reshape(ops.cast(loss_values, "float32"), [-1])


def domain_term(per_point: Any, n_source: Any, reduction: str) -> Any:
    """The batch's domain term: `per_point[:n_source]` are the source points, the rest the target's."""
    if reduction == MEAN_OVER_BATCH:
        return ops.mean(per_point)
    both = ops.mean(per_point[:n_source]) + ops.mean(per_point[n_source:])
    return 0.5 * both if reduction == MEAN_OVER_DOMAINS else both


def domain_accuracy(domain_true: Any, domain_pred: Any, from_logits: bool) -> Any:
    """The fraction of the batch's points whose domain the head tells right."""
    threshold = 0.0 if from_logits else 0.5
    return ops.mean(ops.cast(ops.equal(domain_pred > threshold, domain_true > 0.5), "float32"))


DOMAIN_METRICS = ("domain_loss", "domain_accuracy")
_DOMAIN_COMPILE_KEYS = ("domain_loss", "domain_loss_weight", "domain_from_logits", "domain_loss_reduction")


def check_domain_output(method: str, shape: Any) -> None:
    if rank(shape) not in (1, 2) or (rank(shape) == 2 and shape[-1] not in (1, None)):
        raise ValueError(
            f"{method}: the domain head must output one value per point, P(target domain) or its logit "
            f"(shape [batch, 1] or [batch]), got shape {tuple(shape)}"
        )


class DomainHeadModel(AdversarialModel):
    """An `AdversarialModel` whose adversary is a domain head (see `DANN`, `CDAN`).

    Args:
      feature_extractor, label_head, domain_head: the three parts (as `DANN`'s).
      lambda_max, gamma, lambda_schedule: the reversal's schedule (as `DANN`'s).
      **kwargs: `warm_start_steps` and Keras' `Model` arguments.

    Attributes:
      DEFAULT_REDUCTION: the domain term `compile(domain_loss_reduction=None)`
        gives: DANN's the paper's sum over the domains, CDAN's the authors' mean.
    """

    PARTS = ("feature_extractor", "label_head", "domain_head")
    OWN_OPTIMIZER_PARTS = ("feature_extractor", "domain_head")
    METRIC_NAMES = DOMAIN_METRICS
    DEFAULT_REDUCTION = SUM_OVER_DOMAINS  # the method's domain term by default (DANN: the paper's)

    def __init__(
        self,
        feature_extractor: Any,
        label_head: Any,
        domain_head: Any,
        *,
        lambda_max: float = 1.0,
        gamma: float = 10.0,
        lambda_schedule: str = "paper",
        **kwargs: Any,
    ) -> None:
        super().__init__(lambda_max=lambda_max, gamma=gamma, lambda_schedule=lambda_schedule, **kwargs)
        self.feature_extractor = check_part(self.METHOD, "feature_extractor", feature_extractor)
        self.label_head = check_part(self.METHOD, "label_head", label_head)
        self.domain_head = check_no_reversal(
            self.METHOD, "domain head", check_part(self.METHOD, "domain_head", domain_head)
        )
        self._domain_loss: Any = None
        self._domain_from_logits = False
        self._domain_loss_weight = 1.0
        self._domain_loss_reduction = self.DEFAULT_REDUCTION

    def compile(
        self,
        optimizer: Any = "rmsprop",
        loss: Any = None,
        metrics: Any = None,
        *,
        domain_loss: Any = None,
        domain_loss_weight: float = 1.0,
        domain_from_logits: bool | None = None,
        domain_loss_reduction: str | None = None,
        part_optimizers: dict | None = None,
        **kwargs: Any,
    ) -> None:
        """Keras' `compile` for the label task, plus the domain loss and per-part optimizers.

        Args:
          optimizer: the model's optimizer, as Keras' `compile` takes it.
          loss: the label task's loss, as Keras' `compile` takes it.
          metrics: the label task's metrics, as Keras' `compile` takes them.
          domain_loss: a Keras loss or `fn(y_true, y_pred)` giving per-point
            losses (`y_true`, `y_pred` of shape [batch, 1]); default binary
            cross-entropy (from logits if the domain head outputs logits).
          domain_loss_weight: the domain term's weight in the objective
            `label loss + domain_loss_weight * domain term`.
          domain_from_logits: whether the domain head outputs logits; by
            default told from its last activation (linear: logits; sigmoid:
            probabilities); needed when it cannot be told.
          domain_loss_reduction: `"sum_over_domains"` (the DANN paper's: the
            mean domain loss over the source points plus the mean over the
            target points; DANN's default), `"mean_over_domains"` (half that
            sum: CDAN's authors' scale, CDAN's default) or `"mean_over_batch"`
            (one mean over the batch's points; `"mean_over_domains"` with
            half/half batches); None: the method's default.
          part_optimizers: `{"feature_extractor": ..., "domain_head": ...}`
            (either or both): the part's own optimizer, or a number: the
            model's optimizer at that multiple of its learning rate (see
            `grad_reverse.adaptation.training.optimizers`). The label head, and any part
            not named, train with `optimizer`.
          **kwargs: CDAN's `label_from_logits`, then Keras' keyword `compile` arguments.
        """
        super().compile(
            optimizer,
            loss,
            metrics,
            part_optimizers=part_optimizers,
            domain_loss=domain_loss,
            domain_loss_weight=domain_loss_weight,
            domain_from_logits=domain_from_logits,
            domain_loss_reduction=domain_loss_reduction,
            **kwargs,
        )

    def _method_compile_keys(self) -> tuple:
        return _DOMAIN_COMPILE_KEYS + self._conditioning_compile_keys()

    def _conditioning_compile_keys(self) -> tuple:
        return ()

    def _method_compile(
        self,
        domain_loss: Any = None,
        domain_loss_weight: float = 1.0,
        domain_from_logits: bool | None = None,
        domain_loss_reduction: str | None = None,
        **others: Any,
    ) -> None:
        method = self.METHOD
        if domain_loss_reduction is None:
            domain_loss_reduction = self.DEFAULT_REDUCTION
        self._domain_loss_reduction = check_reduction(domain_loss_reduction, method)
        if domain_from_logits is None:
            activation = activation_name(self.domain_head)
            if activation not in ("linear", "sigmoid"):
                raise ValueError(
                    f"{method}.compile: cannot tell whether the domain head outputs logits or probabilities "
                    f"(its last activation is {activation!r}); pass domain_from_logits=True or False"
                )
            domain_from_logits = activation == "linear"
        self._domain_from_logits = bool(domain_from_logits)
        self._domain_loss_weight = finite(f"{method}: domain_loss_weight", domain_loss_weight)
        if domain_loss is None:
            domain_loss = keras.losses.BinaryCrossentropy(from_logits=self._domain_from_logits)
        elif isinstance(domain_loss, str):
            domain_loss = keras.losses.get(domain_loss)
        if not callable(domain_loss):
            raise TypeError(f"{method}.compile: domain_loss must be a Keras loss or a function, got {domain_loss!r}")
        self._domain_loss = domain_loss
        self._conditioning_compile(**others)

    def _conditioning_compile(self, **others: Any) -> None:
        """CDAN's own compile arguments (none for DANN)."""

    def _method_compile_arguments(self) -> dict:
        return {
            "domain_loss": self._domain_loss,
            "domain_loss_weight": self._domain_loss_weight,
            "domain_from_logits": self._domain_from_logits,
            "domain_loss_reduction": self._domain_loss_reduction,
        }

    def _adversarial_weight(self) -> float:
        return self._domain_loss_weight

    def _domain_losses(self, domain_pred: Any, n_source: Any) -> tuple:
        """`(per-point domain losses [batch], the batch's domain accuracy)`; source points first."""
        check_domain_output(self.METHOD, domain_pred.shape)
        domain_pred = ops.reshape(ops.cast(domain_pred, "float32"), [-1, 1])
        n_target = ops.shape(domain_pred)[0] - n_source
        domain_true = ops.concatenate([ops.zeros((n_source, 1)), ops.ones((n_target, 1))], axis=0)
        loss_fn = self._domain_loss
        per_point = (loss_fn.call if isinstance(loss_fn, keras.losses.Loss) else loss_fn)(domain_true, domain_pred)
        return (
            per_point_losses(per_point, self.METHOD),
            domain_accuracy(domain_true, domain_pred, self._domain_from_logits),
        )

    def _domain_term_and_accuracy(self, domain_pred: Any, n_source: Any) -> tuple:
        """The batch's domain term (reduced as `compile` said) and domain accuracy; source points first."""
        per_point, accuracy = self._domain_losses(domain_pred, n_source)
        return domain_term(per_point, n_source, self._domain_loss_reduction), accuracy

    def _build_head_on(self, inputs: Any) -> None:
        """Builds an unbuilt domain head on `inputs` (one point of what it will see) and checks it
        gives one value per point, before any step (a step's error on JAX leaves Keras' variables
        emptied)."""
        check_domain_output(self.METHOD, self.domain_head(inputs, training=False).shape)

    def _domain_prediction(self, features: Any, lambda_: Any) -> Any:
        """The domain head on what it sees, behind the reversal: DANN's features, or CDAN's
        map of the features and class probabilities."""
        return self.domain_head(reverse(features, lambda_), training=True)
