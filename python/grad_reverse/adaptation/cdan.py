"""`CDAN`: conditional domain-adversarial training (Long et al., NeurIPS 2018).

    features = feature_extractor(x)
    label    = label_head(features)                  # what the model predicts
    g        = class probabilities of label
    domain   = domain_head(GradReverse(lambda_)(T(features, g)))   # training only

`T` is the multilinear map `g ⊗ f` (flattened, class-major: entry
`c * dim(f) + j` is `g_c f_j`), or the randomized multilinear map
`(f R_f) ⊙ (g R_g) / sqrt(d)` with fixed random matrices (standard normal,
from `map_seed`) and `d = randomized_dim` (1024 by default). By default the
randomized map is used when `dim(f) * classes > 4096`, the switch of
Transfer-Learning-Library's examples. CDAN+E (`entropy_conditioning=True`)
weighs each point's domain loss by `w = 1 + exp(-H(g))`,
`H(g) = -sum_c g_c log(g_c + 1e-5)`, normalized within each domain by the
weights' sums taken without gradient. As in the authors' code (thuml/CDAN,
`pytorch/loss.py`), `H` carries gradient, reversed with the same lambda as
the domain head's input: the domain loss reaches the label head and the
features through the entropy weights too. The map's `g` carries gradient
too, reversed with the same lambda (`map_gradient=True`, the default: the
paper's minimax, where the network makes both `f` and `g`, and ADAPT's
CDAN); `map_gradient=False` detaches it, as the authors' code does, so that
the label head gets nothing else from the domain loss (`g` differentiated
trained better on most problems measured: docs/methods.md). With the default
`domain_loss_reduction="mean_over_domains"`, the authors' scale:

    objective = label loss + domain_loss_weight * 0.5 * (sum_s w_s l_s / sum_s w_s + sum_t w_t l_t / sum_t w_t)

with `l` the per-point domain loss (binary cross-entropy by default) of the
source points `s` and the target points `t` (`weighted_domain_term`); without
entropy conditioning, `w = 1` (the authors' plain CDAN: the binary
cross-entropy's mean over a half/half batch). `"sum_over_domains"` drops the
0.5 (the DANN paper's sum); `"mean_over_batch"` normalizes over the whole batch
(`sum w l / sum w`, Transfer-Learning-Library's). The domain head, its loss
and compile arguments are `domain_head.DomainHeadModel`'s (shared with DANN);
batches, the lambda schedule, optimizers and saving `model.AdversarialModel`'s.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from grad_reverse._keras import keras
from grad_reverse.adaptation.domain_head import MEAN_OVER_BATCH, MEAN_OVER_DOMAINS, DomainHeadModel, domain_term
from grad_reverse.adaptation.networks import class_log_probabilities, tell_from_logits
from grad_reverse.backend_ops import ON_TENSORFLOW, mean_over_replicas, ops, rank, reverse

RANDOMIZED_SWITCH = 4096  # dim(f) * classes above which `randomized=None` picks the randomized map
MAX_MULTILINEAR_SIZE = 1 << 20  # per point: 4 MiB of float32 for each point of a batch
ENTROPY_EPSILON = 1e-5  # inside the log of H(g), as Transfer-Learning-Library's entropy


def entropy_weights(probabilities: Any, lambda_: Any = None) -> Any:
    """CDAN+E's per-point weights `1 + exp(-H(g))`, `H(g) = -sum_c g_c log(g_c + 1e-5)`;
    with `lambda_`, the gradient reaching `H` is reversed and scaled by it (the authors'
    `entropy.register_hook(grl_hook(coeff))`): the label head and the features learn to
    make the weights' domain loss larger, as the features do through the domain head."""
    entropy = -ops.sum(probabilities * ops.log(probabilities + ENTROPY_EPSILON), axis=-1)
    if lambda_ is not None:
        entropy = reverse(entropy, lambda_)
    return 1.0 + ops.exp(-entropy)


def weighted_domain_term(per_point: Any, weights: Any, n_source: Any, reduction: str) -> Any:
    """The domain term with per-point weights (CDAN+E's entropy weights), normalized
    within each domain for `"mean_over_domains"` (half the weighted source mean plus
    half the weighted target mean: the authors' code) and `"sum_over_domains"` (their
    sum), over the batch for `"mean_over_batch"` (`sum(w * loss) / sum(w)`,
    Transfer-Learning-Library's). The normalizers carry no gradient (the authors'
    `.detach()`): the weights' gradient is that of `sum(w * loss)` over a constant."""
    weights = ops.reshape(ops.cast(weights, "float32"), [-1])

    def weighted_mean(w: Any, losses: Any) -> Any:
        # Under tf.distribute a replica holds a share of the global batch: its weights are
        # normalized by the mean over the replicas of their sums, so that the replicas'
        # terms, averaged, are the global batch's weighted mean.
        normalizer = ops.stop_gradient(mean_over_replicas(ops.sum(w)))
        return ops.sum(w * losses) / normalizer

    if reduction == MEAN_OVER_BATCH:
        return weighted_mean(weights, per_point)
    both = weighted_mean(weights[:n_source], per_point[:n_source]) + weighted_mean(
        weights[n_source:], per_point[n_source:]
    )
    return 0.5 * both if reduction == MEAN_OVER_DOMAINS else both


def multilinear_map(features: Any, probabilities: Any) -> Any:
    """`g ⊗ f` flattened, [batch, classes * dim(f)]."""
    outer = probabilities[:, :, None] * features[:, None, :]
    return ops.reshape(outer, [-1, probabilities.shape[-1] * features.shape[-1]])


def random_matrices(features: int, classes: int, size: int, seed: int) -> tuple:
    """The randomized map's fixed `(R_f [features, size], R_g [classes, size])`, standard normal."""
    rng = np.random.default_rng(seed)
    r_f = rng.standard_normal((features, size)).astype("float32")
    r_g = rng.standard_normal((classes, size)).astype("float32")
    return r_f, r_g


def randomized_multilinear_map(features: Any, probabilities: Any, r_f: Any, r_g: Any) -> Any:
    """`(f R_f) ⊙ (g R_g) / sqrt(d)`, [batch, d]."""
    size = r_f.shape[-1]
    return ops.matmul(features, r_f) * ops.matmul(probabilities, r_g) / math.sqrt(float(size))


def _backend_errors() -> tuple:
    """The backend's own shape errors, besides ValueError and TypeError (TensorFlow's InvalidArgumentError)."""
    if not ON_TENSORFLOW:
        return ()
    import tensorflow as tf

    return (tf.errors.InvalidArgumentError,)


def _input_size(head: Any) -> int | None:
    """The input size a built head takes, when it can be told (its Input, or its first kernel)."""
    try:
        inputs = getattr(head, "inputs", None)
        if inputs:
            return inputs[0].shape[-1]
    except (AttributeError, ValueError):
        pass
    for layer in [head] + list(getattr(head, "layers", [])):
        kernel = getattr(layer, "kernel", None)
        if kernel is not None:
            return int(kernel.shape[0])
    return None


@keras.saving.register_keras_serializable(package="grad_reverse")
class CDAN(DomainHeadModel):
    """Conditional domain-adversarial training of `label_head(feature_extractor(x))`.

    Args:
      feature_extractor: points -> features [batch, dim(f)].
      label_head: features -> class scores: softmax probabilities, logits,
        or one sigmoid unit (a binary task, worked as two classes).
      domain_head: the map's output -> one value per point, P(target) or its
        logit. An unbuilt Keras model (no `Input`) is built on the map's size
        when `fit` starts; a built one must take that size.
      entropy_conditioning: CDAN+E: weigh the domain loss by `1 + exp(-H(g))`,
        whose gradient reaches the label head and features reversed (the authors').
      randomized: the randomized multilinear map (True), the full one
        (False), or by size (None: randomized when dim(f) * classes > 4096).
      randomized_dim: the randomized map's output size (1024).
      map_seed: the seed of the randomized map's matrices (saved with the model).
      map_gradient: whether the map's class probabilities `g` carry gradient, reversed
        with the features' lambda (into the label head and the features). True (default):
        the paper's objective and ADAPT's CDAN; False: the authors' code (thuml/CDAN and
        Transfer-Learning-Library detach `g`).
      lambda_max, gamma, lambda_schedule: as `DANN`'s.
      **kwargs: those (`lambda_max`, `gamma`, `lambda_schedule`,
        `warm_start_steps`) and Keras' `Model` arguments (`name`, ...).

    `compile` takes DANN's arguments (`domain_loss_reduction` by default
    `"mean_over_domains"`, the authors' scale), and `label_from_logits` when the
    label head's last activation does not tell whether it outputs logits.
    """

    METHOD = "CDAN"
    DEFAULT_REDUCTION = MEAN_OVER_DOMAINS  # the authors' scale: half the DANN paper's sum

    def __init__(
        self,
        feature_extractor: Any,
        label_head: Any,
        domain_head: Any,
        *,
        entropy_conditioning: bool = False,
        randomized: bool | None = None,
        randomized_dim: int = 1024,
        map_seed: int = 0,
        map_gradient: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(feature_extractor, label_head, domain_head, **kwargs)
        if randomized not in (None, True, False):
            raise ValueError(f"CDAN: randomized must be True, False or None (by size), got {randomized!r}")
        if isinstance(randomized_dim, bool) or int(randomized_dim) < 1:
            raise ValueError(f"CDAN: randomized_dim must be an integer >= 1, got {randomized_dim!r}")
        self.entropy_conditioning = bool(entropy_conditioning)
        self.randomized = randomized
        self.randomized_dim = int(randomized_dim)
        self.map_seed = int(map_seed)
        if map_gradient not in (True, False):
            raise ValueError(f"CDAN: map_gradient must be True or False, got {map_gradient!r}")
        self.map_gradient = bool(map_gradient)
        self._label_from_logits = False
        self._label_activation: str | None = None
        self._matrices: dict = {}

    # --- compile -----------------------------------------------------------------------

    def compile(self, *args: Any, label_from_logits: bool | None = None, **kwargs: Any) -> None:
        """DANN's `compile`, and whether the label head outputs logits.

        Args:
          *args: DANN's positional `compile` arguments: `optimizer`, `loss`, `metrics`.
          label_from_logits: whether the label head outputs logits; None: told from
            its last activation (linear: logits; softmax or sigmoid: probabilities),
            a ValueError when it cannot be told.
          **kwargs: DANN's keyword `compile` arguments (`domain_loss`,
            `domain_loss_weight`, `domain_from_logits`, `domain_loss_reduction`,
            by default `"mean_over_domains"` here, `part_optimizers`) and Keras'.
        """
        super().compile(*args, label_from_logits=label_from_logits, **kwargs)

    def _conditioning_compile_keys(self) -> tuple:
        return ("label_from_logits",)

    def _conditioning_compile(self, label_from_logits: bool | None = None) -> None:
        self._label_from_logits, self._label_activation = tell_from_logits(
            self.METHOD, self.label_head, label_from_logits
        )

    def _method_compile_arguments(self) -> dict:
        return dict(super()._method_compile_arguments(), label_from_logits=self._label_from_logits)

    # --- the map -----------------------------------------------------------------------

    def map_size(self, features: int, classes: int) -> int:
        """The map's output size, what the domain head takes.

        Args:
          features: the number of features, dim(f).
          classes: the number of classes (a binary head: 2).
        """
        return self.randomized_dim if self._randomized_for(features, classes) else features * classes

    def _randomized_for(self, features: int, classes: int) -> bool:
        if self.randomized is None:
            return features * classes > RANDOMIZED_SWITCH
        if not self.randomized and features * classes > MAX_MULTILINEAR_SIZE:
            raise ValueError(
                f"CDAN: the multilinear map of {features} features and {classes} classes has "
                f"{features * classes} values per point ({4 * features * classes / 2**20:.0f} MiB of float32 per "
                f"point of a batch), over the {MAX_MULTILINEAR_SIZE} accepted; use the randomized map: "
                f"CDAN(..., randomized=True, randomized_dim={self.randomized_dim}) (or randomized=None)"
            )
        return bool(self.randomized)

    def conditioning_map(self, features: Any, probabilities: Any) -> Any:
        """`T(f, g)`: the multilinear map, or the randomized one (see the module's doc).

        Args:
          features: the features `f`, [batch, dim(f)].
          probabilities: the class probabilities `g`, [batch, classes].
        """
        n_features, classes = int(features.shape[-1]), int(probabilities.shape[-1])
        if not self._randomized_for(n_features, classes):
            return multilinear_map(features, probabilities)
        key = (n_features, classes)
        if key not in self._matrices:
            self._matrices[key] = random_matrices(n_features, classes, self.randomized_dim, self.map_seed)
        return randomized_multilinear_map(features, probabilities, *self._matrices[key])

    # --- the training step -------------------------------------------------------------

    def _features_2d(self, features: Any) -> Any:
        if rank(features.shape) != 2 or features.shape[-1] is None:
            raise ValueError(
                "CDAN: the feature extractor must output [batch, features] with a known size (flatten "
                f"it) for the multilinear map, got shape {tuple(features.shape)}"
            )
        return ops.cast(features, "float32")

    def _adversarial_step(self, features: Any, n_source: Any, lambda_: Any) -> tuple:
        y_all = self.label_head(features, training=True)
        log_p = class_log_probabilities(self.METHOD, y_all, self._label_from_logits, self._label_activation)
        probabilities = ops.exp(log_p)
        # The map's conditioning has gradient unless map_gradient is False (the authors' code), reversed
        # with the map's input by _domain_prediction; the entropy weights' always has, reversed in
        # entropy_weights.
        conditioning = probabilities if self.map_gradient else ops.stop_gradient(probabilities)
        mapped = self.conditioning_map(self._features_2d(features), conditioning)
        domain_pred = self._domain_prediction(mapped, lambda_)
        weights = entropy_weights(probabilities, lambda_) if self.entropy_conditioning else None
        per_point, domain_accuracy = self._domain_losses(domain_pred, n_source)
        reduction = self._domain_loss_reduction
        domain_loss = (
            domain_term(per_point, n_source, reduction)
            if weights is None
            else weighted_domain_term(per_point, weights, n_source, reduction)
        )
        return y_all[:n_source], domain_loss, {"domain_loss": domain_loss, "domain_accuracy": domain_accuracy}

    def _prepare_adversary(self, features: Any) -> None:
        """Builds an unbuilt domain head on the map's size, or checks a built one takes it."""
        n_features = int(self._features_2d(features).shape[-1])
        label_output = self.label_head(features, training=False)
        # Refused here, before any step, as in the step itself (several sigmoid units, a shape).
        class_log_probabilities(self.METHOD, label_output, self._label_from_logits, self._label_activation)
        units = label_output.shape[-1]
        size = self.map_size(n_features, 2 if units == 1 else int(units))
        expected = _input_size(self.domain_head) if self.domain_head.built else None
        what = (
            f"the {'randomized ' if size != n_features * (2 if units == 1 else units) else ''}multilinear map "
            f"gives {size} values per point ({n_features} features, {2 if units == 1 else units} classes)"
        )
        if expected is not None and expected != size:
            raise ValueError(
                f"CDAN: the domain head takes inputs of size {expected}, but {what}; build it for "
                f"{size} inputs, or leave it unbuilt (no Input) to be built on the map's size"
            )
        try:
            self._build_head_on(ops.zeros((1, size), "float32"))
        except (ValueError, TypeError) + _backend_errors() as error:
            raise ValueError(f"CDAN: the domain head does not take the map's output: {what}") from error

    # --- saving ------------------------------------------------------------------------

    def _method_config(self) -> dict[str, Any]:
        return {
            "entropy_conditioning": self.entropy_conditioning,
            "randomized": self.randomized,
            "randomized_dim": self.randomized_dim,
            "map_seed": self.map_seed,
            "map_gradient": self.map_gradient,
        }
