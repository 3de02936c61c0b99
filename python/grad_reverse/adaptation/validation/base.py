"""What a validator is: `Validator`, which scores one trained model, and
`PoolValidator`, which scores every candidate of a pool at once. The
validators themselves are in `validators`."""

from __future__ import annotations

from typing import Any

import numpy as np

from grad_reverse.adaptation.validation.outputs import Outputs, model_outputs


class Validator:
    """Scores a trained model without target labels; higher is better.

    A validator is called on a model and data, and returns a float:

        score = validator(model, x_source, y_source, x_target, from_logits=None)

    Subclasses set `name`, `min_source`, `min_target` and `reads_features`,
    and define `score(outputs)`, or `score_model` when the score also runs
    the model (MixVal predicts its mixtures); `__call__` computes the
    `Outputs` and checks the sizes.

    Attributes:
      name: the validator's key in `VALIDATORS`, the name
        `select_without_labels(validator_name=...)` and `ValidatorCallback`
        take, and what `ValidatorCallback` logs its score as (`val_<name>`).
      min_source: the fewest held-out source points it accepts.
      min_target: the fewest target points it accepts.
      reads_features: whether the score reads the feature extractor's output
        (such a validator refuses a pool that mixes models with and without one).
    """

    name = "validator"
    min_source = 1
    min_target = 1
    reads_features = False

    def check_sizes(self, n_source: int, n_target: int) -> None:
        """A ValueError when there are too few points for this validator.

        Args:
          n_source: the number of held-out source points.
          n_target: the number of target points.
        """
        if n_source < self.min_source or n_target < self.min_target:
            raise ValueError(
                f"{type(self).__name__}: needs at least {self.min_source} held-out source points and "
                f"{self.min_target} target points, got {n_source} and {n_target}"
            )

    def score(self, outputs: Outputs) -> float:
        """The score of what the validator read of a model; higher is better.

        Args:
          outputs: the model's features and class probabilities on both
            domains and the source's labels.

        Returns:
          The score, a float.
        """
        raise NotImplementedError

    def score_model(self, outputs: Outputs, model: Any, x_target: Any, from_logits: bool | None) -> float:
        """The score from the model's outputs, and the model itself for what they do not hold.

        Args:
          outputs: the model's `Outputs` on the data.
          model: the model they were computed from.
          x_target: the unlabeled target points.
          from_logits: whether the label head outputs logits (None: told from the model).

        Returns:
          The score, a float; higher is better.
        """
        return self.score(outputs)

    def __call__(
        self, model: Any, x_source: Any, y_source: Any, x_target: Any, *, from_logits: bool | None = None
    ) -> float:
        """The model's score (higher is better) from held-out labeled source points and unlabeled target points.

        Args:
          model: a trained `DANN`, `CDAN` or `MDD` (features: its feature
            extractor's output), or any Keras classifier (features: its
            class probabilities).
          x_source: held-out source points, `[points, ...]` (not trained on).
          y_source: their labels: class numbers, one-hot rows, or 0/1 for a
            sigmoid's one unit.
          x_target: unlabeled target points (those trained on may be used: no
            target label is read).
          from_logits: whether the label head outputs logits; default: told
            from its last activation (softmax, sigmoid: probabilities;
            linear: logits, with a cross-entropy loss), or from what
            `compile(label_from_logits=...)` told CDAN and MDD.

        Returns:
          The score, a float; higher is better.

        Raises:
          ValueError: too few points for this validator (`min_source`,
            `min_target`), points of different shapes, labels that do not
            match the points, or a label head whose outputs cannot be told.
        """
        self.check_sizes(len(x_source), len(x_target))
        outputs = model_outputs(type(self).__name__, model, x_source, y_source, x_target, from_logits)
        return self.score_model(outputs, model, x_target, from_logits)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class PoolValidator(Validator):
    """Scores every candidate of a pool at once, each against the others
    (`score_pool`): there is no score of one model alone, so it cannot be
    called on a model or logged by `ValidatorCallback`;
    `select_without_labels` scores the candidates with it.

    Attributes:
      name: the validator's key in `POOL_VALIDATORS`: the name
        `select_without_labels(validator_name=...)` and its `also=` take, and
        the candidates' column in the `Selection`'s table.
    """

    def _refuse(self) -> ValueError:
        return ValueError(
            f"{type(self).__name__} ({self.name!r}) scores a pool of candidates at once, each against the "
            "others, not one model: pass it to select_without_labels (with every candidate), not to a "
            "model or to ValidatorCallback"
        )

    def score_pool(self, outputs: list) -> np.ndarray:
        """One score per candidate, in the order of `outputs`.

        Args:
          outputs: each candidate's `Outputs`, on the same points.

        Returns:
          The scores, an array (higher is better).
        """
        raise NotImplementedError

    def score(self, outputs: Outputs) -> float:
        raise self._refuse()

    def __call__(self, *args: Any, **kwargs: Any) -> float:
        """Refused: a pool validator scores no model alone.

        Args:
          *args: whatever a `Validator` is called with (ignored).
          **kwargs: likewise.

        Raises:
          ValueError: always, saying to pass it to `select_without_labels`.
        """
        raise self._refuse()
