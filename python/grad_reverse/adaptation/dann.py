"""`DANN`: domain-adversarial training (Ganin et al., JMLR 2016) from three user models.

    features = feature_extractor(x)
    label    = label_head(features)                        # what the model predicts
    domain   = domain_head(GradReverse(lambda_)(features))  # training only

The label loss (`compile(loss=...)`) covers the source points only; the
domain loss (binary cross-entropy by default) covers both, with domain label
0 for source and 1 for target, reduced as the paper does: the mean over the
source points plus the mean over the target points:

    objective = label loss + domain_loss_weight * (mean_s l_s + mean_t l_t)

(`domain_head.domain_term`; `compile(domain_loss_reduction="mean_over_batch")`
takes one mean over the batch instead). The domain head's loss and compile
arguments are `domain_head.DomainHeadModel`'s (shared with CDAN); the training
itself (batches, the lambda schedule, optimizers, saving) the shared
`model.AdversarialModel`'s.
"""

from __future__ import annotations

from typing import Any

from grad_reverse._keras import keras
from grad_reverse.adaptation.domain_head import DomainHeadModel


@keras.saving.register_keras_serializable(package="grad_reverse")
class DANN(DomainHeadModel):
    """Domain-adversarial training of `label_head(feature_extractor(x))`.

    Args:
      feature_extractor: a Keras model or layer, points -> features.
      label_head: features -> the label task's output (what the model predicts).
      domain_head: features -> one value per point, P(target) or its logit;
        it sees the features through `GradReverse`, inside this class.
      lambda_max: the final (or, with `lambda_schedule="constant"`, the
        constant) gradient reversal factor.
      gamma: steepness of the paper's ramp `lambda_max * (2 / (1 + exp(-gamma p)) - 1)`.
      lambda_schedule: `"paper"` (the ramp over each fit's progress p),
        `"constant"`, or `"warm_start"` (the ramp over `warm_start_steps`
        steps, Transfer-Learning-Library's).
      **kwargs: `warm_start_steps` (with `lambda_schedule="warm_start"`),
        then Keras' `Model` arguments (`name`, ...).

    `compile(optimizer, loss, metrics)` describes the label task, as for any
    Keras model; `domain_loss` (default: binary cross-entropy, from logits
    when the domain head's last activation is linear), `domain_loss_weight`,
    `domain_loss_reduction` and `part_optimizers` are keyword arguments of
    `compile`.

    `fit(x_source, y_source, target=x_target)` (arrays, or datasets of
    points: see `fit`) trains; the History has `loss` (the label loss), the
    label metrics, `domain_loss`, `domain_accuracy` and `lambda`. Calling
    the model, `predict`, `evaluate` and `export_serving` use the label
    path only (no GradReverse op).
    """

    METHOD = "DANN"

    def _adversarial_step(self, features: Any, n_source: Any, lambda_: Any) -> tuple:
        y_pred = self.label_head(features[:n_source], training=True)
        domain_pred = self._domain_prediction(features, lambda_)
        domain_loss, domain_accuracy = self._domain_term_and_accuracy(domain_pred, n_source)
        return y_pred, domain_loss, {"domain_loss": domain_loss, "domain_accuracy": domain_accuracy}

    def _prepare_adversary(self, features: Any) -> None:
        self._build_head_on(features)
