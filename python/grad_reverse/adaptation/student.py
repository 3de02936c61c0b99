"""`Student`: one network taught on the target by a fixed teacher (typically
`select_without_labels`' gated ensemble), the size of one candidate.

    features = feature_extractor(x)
    label    = label_head(features)             # what the model predicts
    q        = teacher(x)                        # training only, no gradient

Every batch holds labeled source points and unlabeled target points, as the
adversarial models' do (`paired_dataset`). The objective:

    objective = source_weight * label loss (source)
              + lambda * [ pseudo-label loss (target) + entropy_weight * conditional entropy (target) ]

* **Pseudo-labels** are the teacher's classes on the target points it is
  confident about, with AdaMatch's relative confidence rule (Berthelot et al.,
  ICLR 2022): a target point counts when the teacher's largest probability is
  at least `confidence` times the teacher's mean largest probability on the
  batch's *source* points, so the threshold follows how confident the
  teacher is where it is right, with no per-shift constant. The loss is the
  student's cross-entropy against those classes, averaged over the whole
  target half of the batch (a point below the threshold adds 0).
* **Conditional entropy** of the student's target predictions (VADA, Shu et
  al., ICLR 2018; DIRT-T's refinement): the boundary moves out of the dense
  regions of the target, so what the teacher labels confidently spreads to
  the points it does not.
* **Class proportions** are the teacher's, not re-balanced: the target's may
  differ from the source's (label shift), and aligning them to the source's
  (AdaMatch's distribution alignment) would undo that.
* `lambda` ramps from 0 to `lambda_max` over the fit as DANN's does
  (`grad_reverse.schedule`, gamma 10), so the student first learns the
  source task.

The student's feature extractor and label head are fresh networks of the
candidates' architecture (inference at one model's cost: calling the model,
`predict`, `evaluate` and `export_serving` use them only; the teacher is
kept for training and saved with the model, so a fit resumes after a kill
like the adversarial models' fits, `BackupAndRestore` included). It trains
on every Keras backend with the adversarial models' steps.
"""

from __future__ import annotations

from typing import Any

from grad_reverse._keras import keras
from grad_reverse.adaptation.model import AdversarialModel
from grad_reverse.adaptation.networks import check_part, class_log_probabilities, tell_from_logits
from grad_reverse.backend_ops import ops, replicas_in_sync
from grad_reverse.schedule import finite

CONFIDENCE = 0.9  # AdaMatch's relative threshold tau
ENTROPY_WEIGHT = 0.1


def teacher_log_probabilities(output: Any) -> Any:
    """The teacher's output `[points, units]` (probabilities: one sigmoid unit, or one column
    per class) as class log-probabilities `[points, classes]`."""
    activation = "sigmoid" if output.shape[-1] == 1 else "softmax"
    return class_log_probabilities("Student", ops.cast(output, "float32"), False, activation)


def target_term(log_p: Any, teacher_source: Any, teacher_target: Any, confidence: float, entropy_weight: float):
    """`(pseudo-label loss + entropy_weight * conditional entropy, {metric: value})` on one batch.

    Args:
      log_p: the student's class log-probabilities on the target points.
      teacher_source: the teacher's class log-probabilities on the source points.
      teacher_target: the teacher's class log-probabilities on the target points.
      confidence: the relative threshold (AdaMatch's tau).
      entropy_weight: the conditional entropy's weight.
    """
    q_source, q_target = ops.exp(ops.stop_gradient(teacher_source)), ops.exp(ops.stop_gradient(teacher_target))
    threshold = confidence * ops.mean(ops.max(q_source, axis=-1))
    top = ops.max(q_target, axis=-1)
    kept = ops.cast(top >= threshold, "float32")
    pseudo = ops.cast(ops.equal(q_target, ops.expand_dims(top, -1)), "float32")
    pseudo = pseudo / ops.sum(pseudo, axis=-1, keepdims=True)  # a tie shares its point
    pseudo_loss = ops.mean(kept * -ops.sum(pseudo * log_p, axis=-1))
    entropy = ops.mean(-ops.sum(ops.exp(log_p) * log_p, axis=-1))
    logs = {"pseudo_label_loss": pseudo_loss, "pseudo_label_share": ops.mean(kept), "target_entropy": entropy}
    return pseudo_loss + entropy_weight * entropy, logs


@keras.saving.register_keras_serializable(package="grad_reverse")
class Student(AdversarialModel):
    """`label_head(feature_extractor(x))` taught on the target by a fixed `teacher`.

    Args:
      feature_extractor: points -> features (a fresh network, e.g. of the
        candidates' architecture).
      label_head: features -> class scores: softmax probabilities, logits,
        or one sigmoid unit (binary).
      teacher: the trained classifier whose target predictions teach, with
        probabilities as output (one sigmoid unit or one column per class):
        typically `select_without_labels(...).ensemble`. Never trained.
      confidence: AdaMatch's relative threshold: a target point's
        pseudo-label counts when the teacher's top probability there is at
        least this times its mean top probability on the batch's source points.
      entropy_weight: the weight of the student's conditional entropy on the target.
      source_weight: the source label loss's weight (0: the teacher alone
        teaches, as DIRT-T's refinement does; measured worse on two of
        three shifts, docs/results/validators.md).
      lambda_max, gamma, lambda_schedule, warm_start_steps: the target
        term's weight and its ramp over the fit (see `grad_reverse.schedule`).
      **kwargs: Keras' `Model` arguments (`name`, ...).

    `compile(optimizer, loss, metrics, label_from_logits=None)` as DANN's
    (the loss is the source labels'); `fit(x_source, y_source,
    target=x_target, ...)` as DANN's. The History has `loss`, the label
    metrics, `pseudo_label_loss`, `pseudo_label_share` (the share of target
    points the teacher labels), `target_entropy` and `lambda`.

    Example:
      >>> selection = select_without_labels(candidates, x_val, y_val, x_target)
      >>> student = Student(new_feature_extractor, new_label_head, selection.ensemble)
      >>> student.compile(keras.optimizers.Adam(0.01), "binary_crossentropy")
      >>> student.fit(x_source, y_source, target=x_target, batch_size=256, epochs=4, steps_per_epoch=250)
    """

    METHOD = "Student"
    PARTS = ("feature_extractor", "label_head", "teacher")
    OWN_OPTIMIZER_PARTS = ("feature_extractor",)
    METRIC_NAMES = ("pseudo_label_loss", "pseudo_label_share", "target_entropy")

    def __init__(
        self,
        feature_extractor: Any,
        label_head: Any,
        teacher: Any,
        *,
        confidence: float = CONFIDENCE,
        entropy_weight: float = ENTROPY_WEIGHT,
        source_weight: float = 1.0,
        lambda_max: float = 1.0,
        gamma: float = 10.0,
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
        self.feature_extractor = check_part("Student", "feature_extractor", feature_extractor)
        self.label_head = check_part("Student", "label_head", label_head)
        self.teacher = check_part("Student", "teacher", teacher)
        self.teacher.trainable = False
        self.confidence = finite("Student: confidence", confidence)
        self.entropy_weight = finite("Student: entropy_weight", entropy_weight)
        self.source_weight = finite("Student: source_weight", source_weight)
        if not 0.0 < self.confidence <= 1.0 or self.entropy_weight < 0.0:
            raise ValueError(
                f"Student: confidence must be in (0, 1] and entropy_weight >= 0, got {confidence} and "
                f"{entropy_weight}; AdaMatch's confidence is {CONFIDENCE}"
            )
        self._label_from_logits = False
        self._label_activation: str | None = None

    def call(self, inputs: Any, training: bool | None = None) -> Any:
        """The label head's output (the teacher is not called, but built on the first call).

        Args:
          inputs: points, or a training batch's `(x_source, x_target)`.
          training: Keras' training flag, passed to the parts.
        """
        output = super().call(inputs, training=training)
        if not getattr(self, "_teacher_checked", False):  # the first call: before any training step
            points = inputs[0] if isinstance(inputs, (tuple, list)) and len(inputs) == 2 else inputs
            self._check_teacher(self.teacher(points, training=False), output)
            self._teacher_checked = True
        return output

    def _check_teacher(self, teacher_output: Any, label_output: Any) -> None:
        """The teacher must label the label head's classes (one unit standing for two)."""
        classes = [max(2, int(o.shape[-1])) for o in (teacher_output, label_output)]
        if len(teacher_output.shape) != 2 or classes[0] != classes[1]:
            raise ValueError(
                f"Student: the teacher gives {tuple(teacher_output.shape)} per batch and the label head "
                f"{tuple(label_output.shape)}; accepted: a teacher over the label head's classes, with "
                "probabilities as output (one sigmoid unit for two classes, or one column per class)"
            )

    # --- compile -----------------------------------------------------------------------

    def compile(self, *args: Any, label_from_logits: bool | None = None, **kwargs: Any) -> None:
        """Keras' `compile` and `part_optimizers`, and whether the label head outputs logits.

        Args:
          *args: Keras' positional `compile` arguments: `optimizer`, `loss`, `metrics`.
          label_from_logits: whether the label head outputs logits; None:
            told from its last activation (linear: logits; softmax or
            sigmoid: probabilities).
          **kwargs: `part_optimizers` and Keras' keyword `compile` arguments.
        """
        super().compile(*args, label_from_logits=label_from_logits, **kwargs)

    def _method_compile_keys(self) -> tuple:
        return ("label_from_logits",)

    def _method_compile(self, label_from_logits: bool | None = None) -> None:
        self._label_from_logits, self._label_activation = tell_from_logits(
            "Student", self.label_head, label_from_logits
        )

    def _method_compile_arguments(self) -> dict:
        return {"label_from_logits": self._label_from_logits}

    def _adversarial_weight(self) -> float:
        return 1.0

    # --- the training step -------------------------------------------------------------

    def objective(
        self, x_source: Any, x_target: Any, y_source: Any, sample_weight: Any = None, lambda_: Any = None
    ) -> tuple:
        """`(total, label loss, label output on the source, {metric: value}, features)` of one batch
        (the adversarial models' contract, so each backend's step trains it).

        Args:
          x_source: the batch's source points.
          x_target: the batch's target points.
          y_source: the source points' labels.
          sample_weight: the source points' weights, or None.
          lambda_: the target term's weight; default: the schedule's.
        """
        lambda_ = self.current_lambda() if lambda_ is None else lambda_
        points = ops.concatenate([x_source, x_target], axis=0)
        n_source = ops.shape(x_source)[0]
        teacher = teacher_log_probabilities(self.teacher(points, training=False))
        features = self.feature_extractor(points, training=True)
        y_all = self.label_head(features, training=True)
        y_pred = y_all[:n_source]
        label_loss = self.compute_loss(x=x_source, y=y_source, y_pred=y_pred, sample_weight=sample_weight)
        log_p = class_log_probabilities("Student", y_all[n_source:], self._label_from_logits, self._label_activation)
        term, logs = target_term(log_p, teacher[:n_source], teacher[n_source:], self.confidence, self.entropy_weight)
        total = self.source_weight * ops.cast(label_loss, "float32") + lambda_ * term / float(replicas_in_sync())
        return total, label_loss, y_pred, logs, features

    def _prepare_adversary(self, features: Any) -> None:
        """Checks, before any step, that the label head gives class probabilities."""
        output = self.label_head(features, training=False)
        class_log_probabilities("Student", output, self._label_from_logits, self._label_activation)

    # --- saving ------------------------------------------------------------------------

    def _method_config(self) -> dict[str, Any]:
        return {
            "confidence": self.confidence,
            "entropy_weight": self.entropy_weight,
            "source_weight": self.source_weight,
        }
