"""`DANN`: a Keras model that wires domain-adversarial training
(Ganin et al., JMLR 2016) from three user models.

    features = feature_extractor(x)
    label    = label_head(features)                        # what the model predicts
    domain   = domain_head(GradReverse(lambda_)(features))  # training only

Every training batch holds labeled source points and unlabeled target points
(`paired_dataset`). The label loss (`compile(loss=...)`) covers the source
points only; the domain loss (binary cross-entropy by default) covers both,
with domain label 0 for source and 1 for target, reduced as the paper does:
the mean over the source points plus the mean over the target points
(`objective`). Lambda follows the paper's schedule over the fit, computed
inside the training step from a step counter, so it is exact per step with
`steps_per_execution > 1` and XLA. The feature extractor and the domain
head may have optimizers of their own (`optimizers`).
"""

from __future__ import annotations

from typing import Any, Optional

import tensorflow as tf

from grad_reverse._keras import keras
from grad_reverse.dann import keras_compat, objective
from grad_reverse.dann.data import check_paired_spec, one_pass_steps, paired_dataset, source_length, split_batch_size
from grad_reverse.dann.optimizers import PARTS, build_every_optimizer, make_part_optimizers, optimizer_groups
from grad_reverse.dann.schedules import _finite, lambda_at_step
from grad_reverse.ops import grad_reverse

LAMBDA_SCHEDULES = ("paper", "constant")
DEFAULT_BATCH_SIZE = 64
_DOMAIN_KEYS = ("domain_loss", "domain_accuracy", "lambda")


class _ScheduleState:
    """The lambda schedule's position: the global step within the ramp, and the ramp's length.

    A plain holder, so Keras tracks neither variable: they are not weights
    of the model (not saved, not in `get_weights()`), and `fit` sets them.
    """

    def __init__(self) -> None:
        # ONLY_FIRST_REPLICA: every replica runs the step; the counter moves once.
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="dann_step",
                                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.total_steps = tf.Variable(1, dtype=tf.int64, trainable=False, name="dann_total_steps",
                                       aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)


class _DomainMetrics:
    """The domain loss and accuracy trackers, held outside Keras' attribute
    tracking: Keras 2 would count a metric attribute's state among the
    model's weights (saved, in `get_weights()`). `DANN.metrics` lists them."""

    def __init__(self) -> None:
        self.loss = keras.metrics.Mean(name="domain_loss")
        self.accuracy = keras.metrics.Mean(name="domain_accuracy")
        # The step's lambda as a metric (reset every step: the last value),
        # not a plain tensor: Keras 2 sums plain per-replica outputs over
        # the replicas of a MirroredStrategy.
        self.lambda_ = keras.metrics.Mean(name="lambda")


def _activation_name(head: Any) -> Optional[str]:
    """The name of the activation that produces `head`'s output, when it can be told."""
    activation = getattr(head, "activation", None)
    if activation is not None:
        return getattr(activation, "__name__", None)
    layers = getattr(head, "layers", None)
    return _activation_name(layers[-1]) if layers else None


def _check_domain_output(shape: tf.TensorShape) -> None:
    if shape.rank not in (1, 2) or (shape.rank == 2 and shape[-1] not in (1, None)):
        raise ValueError(
            "DANN: the domain head must output one value per point, P(target domain) or its logit "
            f"(shape [batch, 1] or [batch]), got shape {shape}")


@keras.saving.register_keras_serializable(package="grad_reverse")
class DANN(keras.Model):
    """Domain-adversarial training of `label_head(feature_extractor(x))`.

    Args:
      feature_extractor: a Keras model or layer, points -> features.
      label_head: features -> the label task's output (what the model predicts).
      domain_head: features -> one value per point, P(target) or its logit;
        it sees the features through `GradReverse`, inside this class.
      lambda_max: the final (or, with `lambda_schedule="constant"`, the
        constant) gradient reversal factor.
      gamma: steepness of the paper's ramp `lambda_max * (2 / (1 + exp(-gamma p)) - 1)`.
      lambda_schedule: `"paper"` (the ramp over each fit's progress p) or `"constant"`.

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
        super().__init__(**kwargs)
        for name, part in (("feature_extractor", feature_extractor), ("label_head", label_head),
                           ("domain_head", domain_head)):
            if not isinstance(part, keras.layers.Layer):
                raise TypeError(f"DANN: {name} must be a Keras model or layer, got {type(part).__name__}")
        if lambda_schedule not in LAMBDA_SCHEDULES:
            raise ValueError(f"DANN: lambda_schedule must be one of {LAMBDA_SCHEDULES}, got {lambda_schedule!r}")
        self.feature_extractor = feature_extractor
        self.label_head = label_head
        self.domain_head = domain_head
        self.lambda_max = _finite("DANN: lambda_max", lambda_max)
        self.gamma = _finite("DANN: gamma", gamma)
        self.lambda_schedule = lambda_schedule
        self._schedule = _ScheduleState()
        self._domain_metrics = _DomainMetrics()
        self._domain_loss: Any = None
        self._domain_from_logits = False
        self._domain_loss_weight = 1.0
        self._domain_loss_reduction = objective.SUM_OVER_DOMAINS
        # Set by compile: a part's own optimizer, or None (the model's optimizer trains it).
        self.feature_extractor_optimizer: Any = None
        self.domain_head_optimizer: Any = None

    # --- the model as users call it: the label path ------------------------------

    def call(self, inputs: Any, training: Optional[bool] = None) -> Any:
        """The label head's output. `inputs`: points, or a training batch's `(x_source, x_target)`
        (then the output is for `x_source`, matching the batch's labels)."""
        if isinstance(inputs, (tuple, list)) and len(inputs) == 2:
            inputs = inputs[0]
        return self.label_head(self.feature_extractor(inputs, training=training), training=training)

    @property
    def metrics(self) -> list:
        """Keras' metrics (the label loss and metrics), then the domain loss and accuracy, and lambda."""
        own = self._domain_metrics
        return list(super().metrics) + [own.loss, own.accuracy, own.lambda_]

    # --- compile ---------------------------------------------------------------------

    def compile(
        self,
        optimizer: Any = "rmsprop",
        loss: Any = None,
        metrics: Any = None,
        *,
        domain_loss: Any = None,
        domain_loss_weight: float = 1.0,
        domain_from_logits: Optional[bool] = None,
        domain_loss_reduction: str = objective.SUM_OVER_DOMAINS,
        part_optimizers: Optional[dict] = None,
        **kwargs: Any,
    ) -> None:
        """Keras' `compile` for the label task, plus the domain loss and per-part optimizers.

        Args:
          domain_loss: a Keras loss or `fn(y_true, y_pred)` giving per-point
            losses (`y_true`, `y_pred` of shape [batch, 1]); default binary
            cross-entropy (from logits if the domain head outputs logits).
          domain_loss_weight: the domain term's weight in the objective
            `label loss + domain_loss_weight * domain term`.
          domain_from_logits: whether the domain head outputs logits; by
            default told from its last activation (linear: logits; sigmoid:
            probabilities); needed when it cannot be told.
          domain_loss_reduction: `"sum_over_domains"` (the paper's: the mean
            domain loss over the source points plus the mean over the target
            points) or `"mean_over_batch"` (one mean over the batch's points,
            as versions before this option trained; half the paper's term
            with half/half batches).
          part_optimizers: `{"feature_extractor": ..., "domain_head": ...}`
            (either or both): the part's own optimizer, or a number: the
            model's optimizer at that multiple of its learning rate (see
            `grad_reverse.dann.optimizers`). The label head, and any part
            not named, train with `optimizer`.
        """
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)
        part_optimizers = make_part_optimizers(part_optimizers, self.optimizer)
        self.feature_extractor_optimizer = part_optimizers.get("feature_extractor")
        self.domain_head_optimizer = part_optimizers.get("domain_head")
        self._domain_loss_reduction = objective.check_reduction(domain_loss_reduction)
        if domain_from_logits is None:
            activation = _activation_name(self.domain_head)
            if activation not in ("linear", "sigmoid"):
                raise ValueError(
                    "DANN.compile: cannot tell whether the domain head outputs logits or probabilities "
                    f"(its last activation is {activation!r}); pass domain_from_logits=True or False")
            domain_from_logits = activation == "linear"
        self._domain_from_logits = bool(domain_from_logits)
        self._domain_loss_weight = _finite("DANN: domain_loss_weight", domain_loss_weight)
        if domain_loss is None:
            domain_loss = keras.losses.BinaryCrossentropy(from_logits=self._domain_from_logits)
        elif isinstance(domain_loss, str):
            domain_loss = keras.losses.get(domain_loss)
        if not callable(domain_loss):
            raise TypeError(f"DANN.compile: domain_loss must be a Keras loss or a function, got {domain_loss!r}")
        self._domain_loss = domain_loss

    def get_compile_config(self) -> Optional[dict]:
        config = super().get_compile_config()
        if config is not None and getattr(self, "_domain_loss", None) is not None:  # compiled
            arguments = {"domain_loss": self._domain_loss, "domain_loss_weight": self._domain_loss_weight,
                         "domain_from_logits": self._domain_from_logits,
                         "domain_loss_reduction": self._domain_loss_reduction,
                         "part_optimizers": self._part_optimizers() or None}
            config = dict(config, **{k: keras_compat.serialize(v) for k, v in arguments.items()})
        return config

    def compile_from_config(self, config: dict) -> None:
        # Keras' own skips compile() when a model overrides it.
        self.compile(**keras_compat.compile_arguments(config))
        if self.built:
            self.build_optimizers()  # so the saved optimizer states load

    def build_optimizers(self) -> None:
        """Builds the state of every optimizer: the model's (on all trainable
        weights) and the parts' own. `fit` does it; a custom training loop
        calls it once, after building the model and before the first
        `train_step` (under the strategy's scope when there is one)."""
        build_every_optimizer(self, self._part_optimizers())

    def _part_optimizers(self) -> dict:
        """`{part: its own optimizer}` for the parts that have one."""
        named = {part: getattr(self, f"{part}_optimizer") for part in PARTS}
        return {part: optimizer for part, optimizer in named.items() if optimizer is not None}

    # --- the training step -----------------------------------------------------------

    def current_lambda(self) -> tf.Tensor:
        """Lambda of the next training step (float32 tensor)."""
        if self.lambda_schedule == "constant":
            return tf.constant(self.lambda_max, tf.float32)
        return lambda_at_step(self._schedule.step, self._schedule.total_steps, self.gamma, self.lambda_max)

    def set_schedule_steps(self, total_steps: int, step: int = 0) -> None:
        """Places the lambda ramp: `total_steps` steps in all, the next step being `step`.

        `fit` calls it (`epochs * steps_per_epoch`, `initial_epoch * steps_per_epoch`);
        a custom training loop calling `train_step` calls it first.
        """
        if int(total_steps) < 1 or int(step) < 0:
            raise ValueError(f"DANN: total_steps must be >= 1 and step >= 0, got {total_steps} and {step}")
        self._schedule.total_steps.assign(int(total_steps))
        self._schedule.step.assign(int(step))

    def _domain_term_and_accuracy(self, domain_pred: tf.Tensor, n_source: tf.Tensor) -> tuple:
        """The batch's domain term (see `objective`) and domain accuracy; source points first."""
        _check_domain_output(domain_pred.shape)
        domain_pred = tf.reshape(tf.cast(domain_pred, tf.float32), [-1, 1])
        n_points = tf.shape(domain_pred)[0]
        domain_true = tf.reshape(tf.cast(tf.range(n_points) >= n_source, tf.float32), [-1, 1])
        loss_fn = self._domain_loss
        per_point = (loss_fn.call if isinstance(loss_fn, keras.losses.Loss) else loss_fn)(domain_true, domain_pred)
        term = objective.domain_term(objective.per_point_losses(per_point), n_source, self._domain_loss_reduction)
        return term, objective.domain_accuracy(domain_true, domain_pred, self._domain_from_logits)

    def train_step(self, data: Any) -> dict:
        if self._domain_loss is None:
            raise RuntimeError("DANN: compile() the model before training it")
        x, y_source, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        if not (isinstance(x, (tuple, list)) and len(x) == 2):
            raise ValueError("DANN.train_step: a batch must be ((x_source, x_target), y_source); "
                             f"got inputs {x!r}")
        x_source, x_target = x
        n_source = tf.shape(x_source)[0]
        lambda_ = self.current_lambda()
        with tf.GradientTape() as tape:
            features = self.feature_extractor(tf.concat([x_source, x_target], 0), training=True)
            y_pred = self.label_head(features[:n_source], training=True)
            label_loss = self.compute_loss(x=x_source, y=y_source, y_pred=y_pred, sample_weight=sample_weight)
            domain_pred = self.domain_head(grad_reverse(features, lambda_), training=True)
            domain_loss, domain_accuracy = self._domain_term_and_accuracy(domain_pred, n_source)
            # Per replica: the optimizer sums the replicas' gradients.
            scaled_domain_loss = domain_loss / tf.cast(keras_compat.replicas_in_sync(), tf.float32)
            total = tf.cast(label_loss, tf.float32) + self._domain_loss_weight * scaled_domain_loss
            total = keras_compat.loss_for_gradients(self, total)
        if self._part_optimizers():
            keras_compat.apply_per_optimizer(tape, total, optimizer_groups(self, self._part_optimizers()))
        else:
            keras_compat.minimize(self, tape, total)
        self._schedule.step.assign_add(1)
        keras_compat.track_label_loss(self, label_loss, n_source)
        self._domain_metrics.loss.update_state(domain_loss)
        self._domain_metrics.accuracy.update_state(domain_accuracy)
        self._domain_metrics.lambda_.reset_state()
        self._domain_metrics.lambda_.update_state(lambda_)
        return self.compute_metrics(x_source, y_source, y_pred, sample_weight=sample_weight)

    def test_step(self, data: Any) -> dict:
        logs = super().test_step(data)
        return {k: v for k, v in logs.items() if k not in _DOMAIN_KEYS}

    # --- fit -------------------------------------------------------------------------

    def fit(
        self,
        x: Any = None,
        y: Any = None,
        batch_size: Optional[int] = None,
        epochs: int = 1,
        *,
        target: Any = None,
        steps_per_epoch: Optional[int] = None,
        initial_epoch: int = 0,
        source_fraction: float = 0.5,
        shuffle: bool = True,
        seed: Optional[int] = None,
        **kwargs: Any,
    ) -> Any:
        """Trains on labeled source data and unlabeled target data.

        Args:
          x, y: the labeled source data: arrays `x` and `y`; or `x` a
            dataset of `(x, y)` points (unbatched) and `y` None; or `x` a
            dataset of ready batches `((x_source, x_target), y_source)`
            (`paired_dataset`) and `target` None.
          batch_size: points per batch, source and target together (default 64).
          target: the unlabeled target data: an array of points or a dataset
            of points (unbatched); sizes may differ from the source's.
          steps_per_epoch: default: one pass over the source points
            (needed for datasets of unknown or infinite length).
          source_fraction: the source share of each batch (half by default);
            with the paper's objective each domain's mean counts the same whatever its share.
          shuffle, seed: reshuffle each domain on every pass; the seed of the
            source order (the target's is `seed + 1`).
          Other keyword arguments (`callbacks`, `verbose`, `validation_data`
          with labeled points of either domain, ...) go to Keras' `fit`.

        Lambda ramps over this fit's `epochs * steps_per_epoch` steps;
        `initial_epoch` resumes the ramp where that epoch starts.
        """
        for unsupported in ("validation_split", "sample_weight", "class_weight"):
            if kwargs.get(unsupported) is not None:
                raise ValueError(f"DANN.fit does not take {unsupported}: put per-point weights of the source "
                                 "into the batches as ((x_source, x_target), y_source, weights) instead"
                                 if unsupported != "validation_split" else
                                 "DANN.fit does not take validation_split: pass validation_data")
        if isinstance(x, tf.data.Dataset) and y is None and target is None:
            check_paired_spec(x.element_spec)
            if batch_size is not None:
                raise ValueError("DANN.fit: batch_size applies to arrays; a dataset of batches has its own")
            dataset, known = x, int(x.cardinality())
            steps = steps_per_epoch or (known if known > 0 else None)
            feature_spec = x.element_spec[0][0]
        else:
            if y is None and not isinstance(x, tf.data.Dataset):
                raise ValueError("DANN: the source data must be labeled: fit(x_source, y_source, target=x_target)")
            if isinstance(x, tf.data.Dataset) and y is not None:
                raise ValueError("DANN.fit: with a dataset x, its elements carry the labels: pass y=None")
            source = x if isinstance(x, tf.data.Dataset) else (x, y)
            batch_size = DEFAULT_BATCH_SIZE if batch_size is None else batch_size
            dataset = paired_dataset(source, target, batch_size, source_fraction=source_fraction,
                                     shuffle=shuffle, seed=seed)
            n_source = source_length(source)
            source_batch, _ = split_batch_size(batch_size, source_fraction)
            steps = steps_per_epoch or (None if n_source is None else one_pass_steps(n_source, source_batch))
            feature_spec = dataset.element_spec[0][0]
        if steps is None:
            raise ValueError("DANN.fit: this data does not tell its length; pass steps_per_epoch")
        if isinstance(epochs, bool) or int(epochs) < 1 or int(initial_epoch) < 0:
            raise ValueError(f"DANN.fit: epochs must be >= 1 and initial_epoch >= 0, got {epochs}, {initial_epoch}")
        self._build_on(feature_spec)
        if self._part_optimizers():
            self.build_optimizers()
        self.set_schedule_steps(int(epochs) * steps, int(initial_epoch) * steps)
        return super().fit(dataset, epochs=epochs, steps_per_epoch=steps, initial_epoch=initial_epoch,
                           shuffle=False, **kwargs)

    def _build_on(self, spec: tf.TensorSpec) -> None:
        """Calls the model once on one zero point, so Keras records single
        points (not training pairs) as its input (export, saving)."""
        if self.built:
            return
        shape = [1] + [1 if d is None else d for d in spec.shape[1:]]
        with self.distribute_strategy.scope():
            self(tf.zeros(shape, spec.dtype), training=False)

    # --- saving ----------------------------------------------------------------------

    def get_config(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "trainable": self.trainable,
            "feature_extractor": keras_compat.serialize(self.feature_extractor),
            "label_head": keras_compat.serialize(self.label_head),
            "domain_head": keras_compat.serialize(self.domain_head),
            "lambda_max": self.lambda_max,
            "gamma": self.gamma,
            "lambda_schedule": self.lambda_schedule,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: Any = None) -> "DANN":
        config = dict(config)
        for part in ("feature_extractor", "label_head", "domain_head"):
            config[part] = keras_compat.deserialize(config[part])
        return cls(**config)

