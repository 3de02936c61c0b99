"""The domain term of the DANN objective, and the domain accuracy.

Ganin et al. (JMLR 2016, §4, the objective E and Algorithm 1) weigh the
domain classifier's loss as the mean over the source points PLUS the mean
over the target points:

    label loss (mean over the source points)
      + domain_loss_weight * (mean domain loss over the source points
                              + mean domain loss over the target points)

`DOMAIN_LOSS_REDUCTIONS` names the two ways `DANN` can reduce the per-point
domain losses of a batch:

* `"sum_over_domains"` (the default): the paper's sum of the two means, for
  any split of the batch; each domain counts the same whatever its share.
* `"mean_over_batch"`: one mean over all the batch's points, what
  `grad_reverse.DANN` trained before this option existed. With half/half
  batches it is half the paper's term, `0.5 * (source mean + target mean)`,
  the convention of Transfer-Learning-Library; with other splits each
  domain counts by its share of the batch.
"""

from __future__ import annotations

import tensorflow as tf

from grad_reverse.dann.keras_compat import mean_over_replicas

SUM_OVER_DOMAINS = "sum_over_domains"
MEAN_OVER_BATCH = "mean_over_batch"
DOMAIN_LOSS_REDUCTIONS = (SUM_OVER_DOMAINS, MEAN_OVER_BATCH)


def check_reduction(reduction: str, method: str = "DANN") -> str:
    """`reduction` if it is one of `DOMAIN_LOSS_REDUCTIONS`; ValueError naming them otherwise."""
    if reduction not in DOMAIN_LOSS_REDUCTIONS:
        raise ValueError(f"{method}.compile: domain_loss_reduction must be one of {DOMAIN_LOSS_REDUCTIONS}, "
                         f"got {reduction!r}")
    return reduction


def per_point_losses(loss_values: tf.Tensor) -> tf.Tensor:
    """The domain loss function's output as one float32 value per point (shape [batch]).

    A loss that already reduced over the batch (a scalar) cannot be split
    into its source and target means: refused when the step is traced.
    """
    shape = loss_values.shape
    if shape.rank not in (1, 2) or (shape.rank == 2 and shape[-1] not in (1, None)):
        raise ValueError("DANN: the domain loss must return one loss per point (shape [batch]), got shape "
                         f"{shape}; pass a Keras loss or a function (y_true, y_pred) -> per-point losses")
    return tf.reshape(tf.cast(loss_values, tf.float32), [-1])


def domain_term(per_point: tf.Tensor, n_source: tf.Tensor, reduction: str) -> tf.Tensor:
    """The batch's domain term: `per_point[:n_source]` are the source points, the rest the target's."""
    if reduction == MEAN_OVER_BATCH:
        return tf.reduce_mean(per_point)
    return tf.reduce_mean(per_point[:n_source]) + tf.reduce_mean(per_point[n_source:])


def weighted_domain_term(per_point: tf.Tensor, weights: tf.Tensor, n_source: tf.Tensor,
                         reduction: str) -> tf.Tensor:
    """The domain term with per-point weights (CDAN+E's entropy weights), normalized
    within each domain for `"sum_over_domains"` (the weighted source mean plus the
    weighted target mean, as CDAN's authors' code normalizes them), over the batch
    for `"mean_over_batch"` (`sum(w * loss) / sum(w)`, Transfer-Learning-Library's)."""
    weights = tf.reshape(tf.cast(weights, tf.float32), [-1])

    def weighted_mean(w: tf.Tensor, losses: tf.Tensor) -> tf.Tensor:
        # Under tf.distribute a replica holds a share of the global batch: its weights are
        # normalized by the mean over the replicas of their sums, so that the replicas'
        # terms, averaged, are the global batch's weighted mean.
        return tf.reduce_sum(w * losses) / mean_over_replicas(tf.reduce_sum(w))

    if reduction == MEAN_OVER_BATCH:
        return weighted_mean(weights, per_point)

    return (weighted_mean(weights[:n_source], per_point[:n_source])
            + weighted_mean(weights[n_source:], per_point[n_source:]))


def domain_accuracy(domain_true: tf.Tensor, domain_pred: tf.Tensor, from_logits: bool) -> tf.Tensor:
    """The fraction of the batch's points whose domain the head tells right."""
    threshold = 0.0 if from_logits else 0.5
    return tf.reduce_mean(tf.cast(tf.equal(domain_pred > threshold, domain_true > 0.5), tf.float32))
