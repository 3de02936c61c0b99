"""`ProbabilityEnsemble`: one Keras model that averages its members' class
probabilities, what `select_without_labels` returns as `Selection.ensemble`
(the plain network and the candidates its source gate keeps).

    p(x) = sum_i w_i * probabilities_i(x)      (sum_i w_i = 1; equal by default)

Each member's label output is turned into probabilities first (a sigmoid or
softmax of logits, as `from_logits` says per member), so members that output
logits and members that output probabilities average alike; the ensemble
outputs probabilities in the members' shape: one unit (P(class 1)) for
binary members, one column per class otherwise.

Averaging the members' predictions, rather than choosing one, is the one way
of using candidates without target labels that carries a bound (IWA, Dinu et
al., ICLR 2023; the ensemble behind EnsV, Hu et al., NeurIPS 2024): by
convexity of the cross-entropy, its loss is at most the members' average
loss. Measured on the project's shifts in docs/results/validators.md.

The ensemble is inference only: it calls its members with `training=False`
(their label path: no GradReverse op), its weights are not trainable, and it
saves as `.keras`, loads, and exports for serving (`export_serving`) like
any Keras model once it has been called (as any subclassed Keras model;
`select_without_labels` calls the one it returns).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grad_reverse._keras import keras
from grad_reverse.adaptation.training import keras_compat
from grad_reverse.backend_ops import ops


def class_probabilities(outputs: Any, from_logits: bool) -> Any:
    """A label head's `outputs` `[points, units]` as probabilities in the same shape (keras.ops):
    a sigmoid of one logit, a softmax over several, or the outputs as they are."""
    if not from_logits:
        return outputs
    return ops.sigmoid(outputs) if outputs.shape[-1] == 1 else ops.softmax(outputs, axis=-1)


@keras.saving.register_keras_serializable(package="grad_reverse")
class ProbabilityEnsemble(keras.Model):
    """The weighted mean of trained classifiers' class probabilities.

    Args:
      members: the trained classifiers (Keras models with the same input and
        the same number of output units), e.g. DANN, CDAN, MDD or plain
        Keras models.
      from_logits: per member, whether its output is logits (True) or
        probabilities (False); one bool for all. `select_without_labels`
        tells it from each member's head.
      member_weights: per member, its weight (non-negative, not all zero;
        normalised to sum to 1); default: equal.
      member_names: per member, a name for reports (default `member0`, ...).
      **kwargs: Keras' `Model` arguments (`name`, ...).

    Raises:
      ValueError: no members, or `from_logits`, `member_weights` or
        `member_names` of another length than `members`, or weights that are
        negative, not finite or all zero.

    Example:
      >>> ensemble = ProbabilityEnsemble([plain, dann], from_logits=False)
      >>> ensemble.predict(x_target)  # the mean of the two models' probabilities
    """

    def __init__(
        self,
        members: Sequence[Any],
        from_logits: bool | Sequence[bool] = False,
        member_weights: Sequence[float] | None = None,
        member_names: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        members = list(members)
        if not members:
            raise ValueError("ProbabilityEnsemble: no members; accepted: a list of one or more trained classifiers")
        n = len(members)
        logits = [bool(from_logits)] * n if isinstance(from_logits, bool) else [bool(f) for f in from_logits]
        names = [f"member{i}" for i in range(n)] if member_names is None else [str(m) for m in member_names]
        weights = [1.0] * n if member_weights is None else [float(w) for w in member_weights]
        for what, values in (("from_logits", logits), ("member_weights", weights), ("member_names", names)):
            if len(values) != n:
                raise ValueError(
                    f"ProbabilityEnsemble: {what} has {len(values)} entries for {n} members; one per member"
                )
        if any(not (w >= 0.0 and w < float("inf")) for w in weights) or sum(weights) <= 0.0:
            raise ValueError(
                f"ProbabilityEnsemble: member_weights must be finite, >= 0 and not all zero, got {weights}"
            )
        self.members = members
        self.from_logits = logits
        self.member_names = names
        self.member_weights = [w / sum(weights) for w in weights]
        self.trainable = False  # inference only: a teacher, never trained through

    def call(self, inputs: Any, training: bool | None = None) -> Any:
        """The weighted mean of the members' probabilities (members always in inference mode).

        Args:
          inputs: points, as each member takes them.
          training: Keras' training flag; ignored (the members run in inference mode).
        """
        total = None
        for member, logits, weight in zip(self.members, self.from_logits, self.member_weights):
            p = ops.cast(class_probabilities(member(inputs, training=False), logits), "float32") * weight
            total = p if total is None else total + p
        return total

    def get_config(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "members": [keras_compat.serialize(m) for m in self.members],
            "from_logits": list(self.from_logits),
            "member_weights": list(self.member_weights),
            "member_names": list(self.member_names),
        }

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: Any = None) -> ProbabilityEnsemble:
        config = dict(config)
        config["members"] = [keras_compat.deserialize(m) for m in config["members"]]
        return cls(**config)
