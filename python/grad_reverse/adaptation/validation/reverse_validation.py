"""Reverse validation (Ganin et al., JMLR 2016, §5.1.2): scoring a DANN
configuration (lambda, learning rate, ...) without target labels.

1. Split the labeled source into S' and a held-out S_V, the unlabeled
   target into T' and T_V (`validation_fraction` of each held out, `seed`).
2. Train a DANN, the forward model, on S' (labeled) and T' (unlabeled).
3. Label T' with the forward model's predictions.
4. Train a second DANN of the same configuration, the reverse model, with
   those self-labeled T' points as its source and S' as its (unlabeled)
   target.
5. Score the reverse model on S_V, whose true labels training never saw.

A configuration whose forward model labels the target well, and whose
features carry that labeling back to the source, gets a low reverse risk.
T_V is held out of both fits and takes no part in the score.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import numpy as np

from grad_reverse._keras import keras
from grad_reverse.adaptation.validation import scores
from grad_reverse.adaptation.validation.validators import Validator, model_outputs


@dataclasses.dataclass
class ReverseValidation:
    """The result of `reverse_validation`.

    Attributes:
      risk: the reverse model's loss on the held-out source points S_V
        (the compiled label loss; lower is better): the score.
      metrics: every value of the reverse model's `evaluate` on S_V.
      forward_model: the DANN trained on S' -> T'.
      reverse_model: the DANN trained on self-labeled T' -> S'.
    """

    risk: float
    metrics: dict
    forward_model: Any
    reverse_model: Any


def split_indices(n: int, validation_fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """`(train, held_out)` indices of `n` points, `held_out` being `round(n * validation_fraction)` (>= 1)."""
    held_out = int(round(n * validation_fraction))
    if not 1 <= held_out <= n - 1:
        raise ValueError(
            f"reverse_validation: validation_fraction {validation_fraction} of {n} points leaves "
            "no point on one side of the split; use more points or another fraction"
        )
    order = rng.permutation(n)
    return np.sort(order[held_out:]), np.sort(order[:held_out])


def _trained(
    make_model: Callable[[], Any], seed: int, x: np.ndarray, y: np.ndarray, target: np.ndarray, fit_kwargs: dict
) -> Any:
    from grad_reverse.adaptation.model import AdversarialModel

    keras.utils.set_random_seed(seed)
    model = make_model()
    if not isinstance(model, AdversarialModel):
        raise TypeError(
            f"reverse_validation: make_model must return a compiled grad_reverse.DANN, CDAN or MDD, got {model!r}"
        )
    model.fit(x, y, target=target, **{"seed": seed, "verbose": 0, **fit_kwargs})
    return model


def reverse_validation(
    make_model: Callable[[], Any],
    x_source: Any,
    y_source: Any,
    x_target: Any,
    *,
    validation_fraction: float = 0.1,
    seed: int = 0,
    pseudo_labels: Callable[[np.ndarray], np.ndarray] | None = None,
    **fit_kwargs: Any,
) -> ReverseValidation:
    """Scores the DANN that `make_model()` builds by the paper's reverse validation.

    Args:
      make_model: builds and compiles a fresh `DANN` of the configuration
        to score; called twice (forward and reverse model), each time after
        `keras.utils.set_random_seed(seed)`.
      x_source, y_source: the labeled source points (arrays).
      x_target: the unlabeled target points (an array).
      validation_fraction: the share of the source (S_V) and of the target
        (T_V) held out of both fits.
      seed: the splits, the models' initialization and the batch order.
      pseudo_labels: turns the forward model's predictions on T' into the
        reverse model's labels, of the shape of `y_source`; default: the
        predictions as they are. For a classifier the paper uses hard
        labels: `lambda p: (p > 0.5).astype("float32")` for a sigmoid
        output, `lambda p: p.argmax(-1)` for softmax and sparse labels.
      fit_kwargs: passed to both `fit` calls (`batch_size`,
        `steps_per_epoch`, `epochs`, ...).

    Returns a `ReverseValidation`; compare configurations by its `risk`.
    """
    if not 0.0 < float(validation_fraction) < 1.0:
        raise ValueError(
            f"reverse_validation: validation_fraction must be between 0 and 1 (exclusive), got {validation_fraction!r}"
        )
    x_source, y_source, x_target = (np.asarray(a) for a in (x_source, y_source, x_target))
    if len(x_source) != len(y_source):
        raise ValueError(
            f"reverse_validation: x_source and y_source must have the same length, got "
            f"{len(x_source)} and {len(y_source)}"
        )
    rng = np.random.default_rng(seed)
    source_train, source_held_out = split_indices(len(x_source), validation_fraction, rng)
    target_train, _ = split_indices(len(x_target), validation_fraction, rng)
    x_s, y_s, x_t = x_source[source_train], y_source[source_train], x_target[target_train]

    forward = _trained(make_model, seed, x_s, y_s, x_t, fit_kwargs)
    predicted = np.asarray(forward.predict(x_t, verbose=0))
    labels = (pseudo_labels or (lambda p: p))(predicted).astype(y_s.dtype).reshape((len(x_t),) + y_s.shape[1:])
    reverse = _trained(make_model, seed, x_t, labels, x_s, fit_kwargs)

    metrics = reverse.evaluate(x_source[source_held_out], y_source[source_held_out], return_dict=True, verbose=0)
    metrics = {name: float(value) for name, value in metrics.items()}
    return ReverseValidation(risk=metrics["loss"], metrics=metrics, forward_model=forward, reverse_model=reverse)


def select_by_reverse_validation(
    candidates: Iterable[Hashable],
    make_model: Callable[[Any], Any],
    x_source: Any,
    y_source: Any,
    x_target: Any,
    **kwargs: Any,
) -> tuple[Any, dict]:
    """The candidate (e.g. a lambda_max) whose DANN has the lowest reverse validation risk.

    Args:
      candidates: the configurations to compare (hashable: they key the result).
      make_model: `make_model(candidate)` builds and compiles the DANN of
        one candidate.
      x_source, y_source: the labeled source points (arrays).
      x_target: the unlabeled target points (an array).
      **kwargs: passed to `reverse_validation` (`validation_fraction`,
        `seed`, `pseudo_labels`, `fit` arguments).

    Returns:
      `(best candidate, {candidate: ReverseValidation})`.
    """
    results = {
        candidate: reverse_validation(lambda c=candidate: make_model(c), x_source, y_source, x_target, **kwargs)
        for candidate in candidates
    }
    if not results:
        raise ValueError("select_by_reverse_validation: no candidates")
    return min(results, key=lambda c: results[c].risk), results


def _hard_labels_like(y: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Class numbers `classes` written as `y` writes its labels (sparse, [n, 1], or one-hot rows)."""
    if y.ndim == 2 and y.shape[1] > 1:
        return np.eye(y.shape[1], dtype=y.dtype)[classes]
    return classes.astype(y.dtype).reshape((len(classes),) + y.shape[1:])


class ReverseValidator(Validator):
    """Reverse validation as a validator (higher is better): the trained model is
    the forward model; it labels the target points (hard labels), a fresh model
    of the same configuration (`make_model()`, compiled) trains on them with
    the held-out source points as its unlabeled target, and the score is that
    reverse model's accuracy on the held-out source points' labels.

    It estimates how well the model's labeling of the target carries back to
    the source. Cost: one whole training per score, so it is the dearest
    validator by far.

    Args:
      make_model: builds and compiles a fresh model of the scored model's
        configuration; called once per score, after
        `keras.utils.set_random_seed(seed)`.
      seed: the reverse model's initialization and batch order.
      **fit_kwargs: passed to the reverse model's `fit` (`batch_size`,
        `epochs`, ...).
    """

    name = "reverse"

    def __init__(self, make_model: Callable[[], Any], *, seed: int = 0, **fit_kwargs: Any):
        if not callable(make_model):
            raise TypeError(f"ReverseValidator: make_model must build a compiled model, got {make_model!r}")
        self.make_model, self.seed, self.fit_kwargs = make_model, seed, fit_kwargs

    def __call__(
        self, model: Any, x_source: Any, y_source: Any, x_target: Any, *, from_logits: bool | None = None
    ) -> float:
        self.check_sizes(len(x_source), len(x_target))
        outputs = model_outputs("ReverseValidator", model, x_source, y_source, x_target, from_logits)
        y_source = np.asarray(y_source)
        pseudo = _hard_labels_like(y_source, outputs.target_probabilities.argmax(axis=1))
        reverse = _trained(
            self.make_model, self.seed, np.asarray(x_target), pseudo, np.asarray(x_source), self.fit_kwargs
        )
        back = model_outputs("ReverseValidator", reverse, x_source, y_source, x_target, from_logits)
        return scores.accuracy(back.source_probabilities, back.source_labels)
