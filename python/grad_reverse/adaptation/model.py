"""`AdversarialModel`: the foundation `DANN`, `CDAN` and `MDD` share.

    features = feature_extractor(x)
    label    = label_head(features)   # what the model predicts
    (training only) an adversarial term on the features behind GradReverse,
    which each method defines (`_adversarial_step`)

Every training batch holds labeled source points and unlabeled target
points (`paired_dataset`). The label loss (`compile(loss=...)`) covers the
source points only; the method's adversarial term covers both domains, and
the objective is `label loss + weight * adversarial term`. Lambda follows a
schedule over the fit (`grad_reverse.schedule`), computed inside the training step from
a step counter, so it is exact per step with `steps_per_execution > 1` and
XLA. Some parts may have optimizers of their own (`optimizers`). Calling the
model, `predict`, `evaluate` and `export_serving` use the label path only
(no GradReverse op); the `.keras` file keeps every part and the compile
arguments.
"""

from __future__ import annotations

from typing import Any

from grad_reverse._keras import KERAS_3, keras
from grad_reverse.adaptation.networks import (
    build_adversary_on,
    build_on_one_point,
    build_unbuilt_parts,
    remember_points,
)
from grad_reverse.adaptation.objective import AdversarialTraining
from grad_reverse.adaptation.training import distribution, keras_compat
from grad_reverse.adaptation.training import steps as train_steps
from grad_reverse.adaptation.training.optimizers import build_every_optimizer, make_part_optimizers
from grad_reverse.adaptation.training.resume import StartFollowsKeras, load_plan, save_plan
from grad_reverse.schedule import ScheduleState, check_schedule, finite, whole


class _AdversarialMetrics:
    """The method's trackers (e.g. domain loss and accuracy) and lambda, held
    outside Keras' attribute tracking: Keras 2 would count a metric
    attribute's state among the model's weights (saved, in `get_weights()`)."""

    def __init__(self, names: tuple) -> None:
        self.by_name = {name: keras.metrics.Mean(name=name) for name in names}
        # The step's lambda as a metric (reset every step: the last value),
        # not a plain tensor: Keras 2 sums plain per-replica outputs over
        # the replicas of a MirroredStrategy.
        self.lambda_ = keras.metrics.Mean(name="lambda")

    def all(self) -> list:
        return list(self.by_name.values()) + [self.lambda_]


class AdversarialModel(AdversarialTraining, keras.Model):
    """The shared training of `label_head(feature_extractor(x))` against an adversary.

    Subclasses set `METHOD` (its name in messages), `PARTS` (the parts, in
    config order), `OWN_OPTIMIZER_PARTS` (those `part_optimizers` may name),
    `METRIC_NAMES` (logged besides the label metrics and `lambda`), and
    define `_adversarial_step`, `_adversarial_weight`, `_prepare_adversary`,
    `_method_compile` and `_method_compile_arguments`.

    Args:
      lambda_max: the largest gradient reversal factor lambda (finite).
      gamma: the ramp's steepness (`dann_lambda`).
      lambda_schedule: how lambda moves over training ("ramp" or "constant",
        as the methods document it).
      warm_start_steps: steps at lambda 0 before the schedule starts, or None.
      **kwargs: Keras' `Model` arguments (`name`, ...).

    Attributes:
      METHOD: the method's name, as its messages start.
      PARTS: the parts (the constructor's Keras models), in config order.
      OWN_OPTIMIZER_PARTS: the parts `compile(part_optimizers=...)` may give
        an optimizer of their own.
      METRIC_NAMES: what the History logs besides the label metrics and `lambda`.
    """

    METHOD = "AdversarialModel"
    PARTS: tuple = ("feature_extractor", "label_head")
    OWN_OPTIMIZER_PARTS: tuple = ("feature_extractor",)
    METRIC_NAMES: tuple = ()

    def __init__(
        self,
        *,
        lambda_max: float,
        gamma: float,
        lambda_schedule: str,
        warm_start_steps: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.lambda_max = finite(f"{self.METHOD}: lambda_max", lambda_max)
        self.gamma = finite(f"{self.METHOD}: gamma", gamma)
        self.lambda_schedule, self.warm_start_steps = check_schedule(self.METHOD, lambda_schedule, warm_start_steps)
        self._schedule = ScheduleState()
        self._adversarial_metrics = _AdversarialMetrics(self.METRIC_NAMES)
        self._compiled_for_adaptation = False
        for part in self.OWN_OPTIMIZER_PARTS:  # set by compile: a part's own optimizer, or None
            setattr(self, f"{part}_optimizer", None)

    # --- the model as users call it: the label path ------------------------------

    def call(self, inputs: Any, training: bool | None = None) -> Any:
        """The label head's output.

        Args:
          inputs: points, or a training batch's `(x_source, x_target)` (then
            the output is for `x_source`, matching the batch's labels).
          training: Keras' training flag, passed to the parts.
        """
        if isinstance(inputs, (tuple, list)) and len(inputs) == 2:
            inputs = inputs[0]
        remember_points(self, inputs)
        features = self.feature_extractor(inputs, training=training)
        build_adversary_on(self, features)  # parts without keras.Input: the first call builds it too
        return self.label_head(features, training=training)

    @property
    def metrics(self) -> list:
        """Keras' metrics (the label loss and metrics), then the method's, and lambda (and on JAX,
        the state Keras' compiled step must carry besides its own, `train_steps.state_carrier`)."""
        return list(super().metrics) + self._adversarial_metrics.all() + train_steps.state_carrier(self)

    # --- compile ---------------------------------------------------------------------

    def compile(
        self,
        optimizer: Any = "rmsprop",
        loss: Any = None,
        metrics: Any = None,
        *,
        part_optimizers: dict | None = None,
        **kwargs: Any,
    ) -> None:
        """Keras' `compile` for the label task, the per-part optimizers, then the method's arguments.

        Args:
          optimizer: the model's optimizer, as Keras' `compile` takes it.
          loss: the label task's loss, as Keras' `compile` takes it.
          metrics: the label task's metrics, as Keras' `compile` takes them.
          part_optimizers: `{part: optimizer or learning-rate scale}` for
            the parts in `OWN_OPTIMIZER_PARTS` (a scale makes a copy of the
            model's optimizer at that share of its learning rate).
          **kwargs: the method's own compile arguments (CDAN's, MDD's
            `label_from_logits`), then Keras' `compile` arguments.
        """
        method_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in self._method_compile_keys()}
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)
        part_optimizers = make_part_optimizers(part_optimizers, self.optimizer, self.OWN_OPTIMIZER_PARTS, self.METHOD)
        for part in self.OWN_OPTIMIZER_PARTS:
            setattr(self, f"{part}_optimizer", part_optimizers.get(part))
        self._method_compile(**method_kwargs)
        self._compiled_for_adaptation = True

    def get_compile_config(self) -> dict | None:
        config = super().get_compile_config()
        if config is not None and getattr(self, "_compiled_for_adaptation", False):
            arguments = {**self._method_compile_arguments(), "part_optimizers": self._part_optimizers() or None}
            config = dict(config, **{k: keras_compat.serialize(v) for k, v in arguments.items()})
        return keras_compat.portable(config) if KERAS_3 else config

    def compile_from_config(self, config: dict) -> None:
        # Keras' own skips compile() when a model overrides it.
        self.compile(**keras_compat.compile_arguments(config))
        if self.built:  # so the saved optimizer states load
            build_unbuilt_parts(self, None)
            build_every_optimizer(self, self._part_optimizers())

    def build_optimizers(self) -> None:
        """Builds every part and every optimizer's state: the model's (on all trainable weights)
        and the parts' own. `fit` does it; a custom training loop calls it once, after calling
        the model (`model(x[:1])`, under the strategy's scope when there is one) and before the
        first `train_step`. A RuntimeError names the parts a model never called lacks."""
        build_unbuilt_parts(self, "build_optimizers")
        build_every_optimizer(self, self._part_optimizers())

    def _part_optimizers(self) -> dict:
        """`{part: its own optimizer}` for the parts that have one."""
        named = {part: getattr(self, f"{part}_optimizer") for part in self.OWN_OPTIMIZER_PARTS}
        return {part: optimizer for part, optimizer in named.items() if optimizer is not None}

    # --- what each method defines ------------------------------------------------------

    def _method_compile_keys(self) -> tuple:
        return ()

    def _method_compile(self, **kwargs: Any) -> None:
        """Checks and keeps the method's own compile arguments."""

    def _method_compile_arguments(self) -> dict:
        """The method's compile arguments, as `compile` takes them back (saved in the .keras file)."""
        return {}

    def _adversarial_step(self, features: Any, n_source: Any, lambda_: Any) -> tuple:
        """`(label head output on the source points, adversarial term, {metric name: value})`."""
        raise NotImplementedError

    def _adversarial_weight(self) -> float:
        """The adversarial term's weight in the objective."""
        raise NotImplementedError

    def _prepare_adversary(self, features: Any) -> None:
        """Builds (or checks) the adversary's parts on one batch of `features`, before training."""

    # --- fit -------------------------------------------------------------------------

    def fit(
        self,
        x: Any = None,
        y: Any = None,
        batch_size: int | None = None,
        epochs: int = 1,
        *,
        target: Any = None,
        steps_per_epoch: int | None = None,
        initial_epoch: int = 0,
        source_fraction: float = 0.5,
        shuffle: bool = True,
        seed: int | None = None,
        **kwargs: Any,
    ) -> Any:
        """Trains on labeled source data and unlabeled target data.

        Args:
          x, y: the labeled source data: arrays `x` and `y`; or `x` a
            dataset of `(x, y)` points (unbatched) and `y` None; or `x` a
            dataset of ready batches `((x_source, x_target), y_source)`
            (`paired_dataset`) and `target` None.
          batch_size: points per batch, source and target together (None: 64).
          epochs: the epoch this fit ends after (as in Keras: counted from 0,
            not from `initial_epoch`).
          target: the unlabeled target data: an array of points or a dataset
            of points (unbatched); sizes may differ from the source's.
          steps_per_epoch: default: one pass over the source points
            (needed for datasets of unknown or infinite length).
          initial_epoch: the epoch to start at (as in Keras; see below).
          source_fraction: the source share of each batch (half by default);
            with the paper's objective each domain's mean counts the same whatever its share.
          shuffle, seed: reshuffle each domain on every pass; the seed of the
            source order (the target's is `seed + 1`).
          **kwargs: go to Keras' `fit` (`callbacks`, `verbose`,
            `validation_data` with labeled points of either domain, ...).

        Lambda ramps over this fit's `epochs * steps_per_epoch` steps. The
        fit starts where Keras starts it: at `initial_epoch`, or at the epoch
        a `keras.callbacks.BackupAndRestore` restores; the ramp and the
        batches (arrays or datasets of points with `target=`, or an endless
        dataset of batches) then continue from that epoch's start, so a
        resumed fit ends with the uninterrupted fit's weights when it was
        saved at an epoch's end (docs/dann.md, "Long runs and preemption").
        """
        method = self.METHOD
        data = train_steps.fit_data(
            method, x, y, batch_size, target, steps_per_epoch, source_fraction, shuffle, seed, kwargs
        )
        epochs = whole(f"{method}.fit: epochs", epochs, 1)
        initial_epoch = whole(f"{method}.fit: initial_epoch", initial_epoch, 0)
        build_on_one_point(self, data.point_spec)
        if self._part_optimizers():
            self.build_optimizers()
        self.set_schedule_steps(int(epochs) * data.steps, int(initial_epoch) * data.steps)
        # Keras may start at another epoch than initial_epoch (BackupAndRestore): the
        # ramp and the batches are placed at the epoch it starts, see `resume`.
        callbacks = [*(kwargs.pop("callbacks", None) or []), StartFollowsKeras(data.steps, data.position, int(epochs))]
        # Under Keras' distribution API (JAX): its rules checked, the model's own batches already per process.
        with distribution.fit_scope(self, own_batches=data.position is not None):
            history = super().fit(
                data.batches,
                epochs=epochs,
                steps_per_epoch=data.keras_steps_per_epoch,
                initial_epoch=initial_epoch,
                shuffle=False,
                callbacks=callbacks,
                **kwargs,
            )
        train_steps.after_fit(self)  # so that a second fit runs (JAX, use_ema=True)
        return history

    def evaluate(self, x: Any = None, y: Any = None, *args: Any, **kwargs: Any) -> Any:
        """Keras' `evaluate` on the label path. After a fit on many processes (JAX), arrays are
        refused with a message that says what works instead (docs/distributed.md).

        Args:
          x: the points (or a dataset), as Keras' `evaluate` takes them.
          y: their labels.
          *args: Keras' `evaluate` arguments.
          **kwargs: likewise.
        """
        distribution.check_arrays_across_processes(self, "evaluate", x)
        return super().evaluate(x, y, *args, **kwargs)

    def predict(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        """Keras' `predict`: the label head's outputs. After a fit on many processes (JAX), arrays are
        refused with a message that says what works instead (docs/distributed.md).

        Args:
          x: the points (or a dataset), as Keras' `predict` takes them.
          *args: Keras' `predict` arguments.
          **kwargs: likewise.
        """
        distribution.check_arrays_across_processes(self, "predict", x)
        return super().predict(x, *args, **kwargs)

    # --- saving ----------------------------------------------------------------------

    def save_own_variables(self, store: Any) -> None:
        super().save_own_variables(store)
        if KERAS_3:  # during a fit: its plan, which a resume compares with its own
            save_plan(self, store)

    def load_own_variables(self, store: Any) -> None:
        super().load_own_variables(load_plan(self, store))

    def _method_config(self) -> dict[str, Any]:
        """The constructor's other arguments (besides the parts and the schedule)."""
        return {}

    def get_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"name": self.name, "trainable": self.trainable}
        for part in self.PARTS:
            config[part] = keras_compat.serialize(getattr(self, part))
        config.update(lambda_max=self.lambda_max, gamma=self.gamma, lambda_schedule=self.lambda_schedule)
        if self.warm_start_steps is not None:
            config["warm_start_steps"] = self.warm_start_steps
        config.update(self._method_config())
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: Any = None) -> AdversarialModel:
        config = dict(config)
        for part in cls.PARTS:
            if config.get(part) is not None:
                config[part] = keras_compat.deserialize(config[part])
        return cls(**config)
