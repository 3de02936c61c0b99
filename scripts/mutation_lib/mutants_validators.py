"""The curated mutants of choosing without target labels, round two: EnsV,
MixVal, the rule's gate (its floor the plain network's), the input check
past the first prediction batch and ValidatorCallback's EMA weights. mutant.py defines Mutant;
mutants.py assembles MUTANTS from these and the other files'.
"""

from __future__ import annotations

from mutation_lib.mutant import Mutant, T

VALIDATOR_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        name="rule-gate-skipped",
        promise="the default rule ranks only the candidates within the held-out source's noise of the plain network",
        file="adaptation/validation/rule.py",
        edits=(
            (
                "    gated, _ = gate(source_accuracy, n_source, plain, z)\n",
                "    gated = list(names)\n",
            ),
        ),
        tests=(
            T + "adaptation/test_validator_rule.py::"
            "test_the_gated_candidate_ranked_highest_wins_and_the_refused_are_not_ranked",
            T
            + "adaptation/test_validator_rule.py::test_a_candidate_below_the_gate_cannot_win_even_when_it_ranks_highest",
        ),
    ),
    Mutant(
        name="rule-floor-from-the-most-accurate-candidate",
        promise="the rule's gate is measured from the plain network's held-out source accuracy, not another candidate's",
        file="adaptation/validation/rule.py",
        edits=(
            (
                "    floor = source_accuracy[plain] - gate_margin(source_accuracy[plain], n_source, z)\n",
                "    best = max(source_accuracy.values())\n    floor = best - gate_margin(best, n_source, z)\n",
            ),
        ),
        tests=(
            T + "adaptation/test_validator_rule.py::"
            "test_the_gate_floor_is_the_plain_networks_even_when_another_candidate_is_more_accurate",
        ),
    ),
    Mutant(
        name="input-check-reads-the-first-prediction-batch-only",
        promise="the validators refuse a non-finite point anywhere, not only in the first prediction batch",
        file="adaptation/validation/outputs.py",
        edits=(
            (
                '    if x.dtype.kind == "f" and not np.all(np.isfinite(x)):\n',
                '    if x.dtype.kind == "f" and not np.all(np.isfinite(x[:PREDICT_BATCH])):\n',
            ),
        ),
        tests=(
            T + "adaptation/test_validator_inputs.py::"
            "test_a_non_finite_target_value_past_the_first_prediction_batch_is_refused_by_every_way_in",
        ),
    ),
    Mutant(
        name="ensv-scores-against-own-predictions",
        promise="EnsV scores each candidate against the pool's averaged predictions, not its own",
        file="adaptation/validation/scores.py",
        edits=(
            (
                "    return np.mean(stacked.argmax(axis=2) == pseudo[None, :], axis=1)\n",
                "    return np.mean(stacked.argmax(axis=2) == stacked.argmax(axis=2), axis=1)\n",
            ),
        ),
        tests=(
            T + "adaptation/test_validators_ensv_mixval_bnm.py::test_ensemble_agreement_by_hand",
            T + "adaptation/test_validators_ensv_mixval_bnm.py::"
            "test_ensemble_validation_scores_each_candidate_against_the_pools_average",
        ),
    ),
    Mutant(
        name="mixval-ratio-ignored",
        promise="MixVal mixes target points at the ratio it is given",
        file="adaptation/validation/one_model.py",
        edits=(
            (
                "(self.ratio * x + (1.0 - self.ratio) * x[permutation])",
                "(0.5 * x + 0.5 * x[permutation])",
            ),
        ),
        tests=(T + "adaptation/test_validators_ensv_mixval_bnm.py::test_mixval_mixes_at_its_ratio_by_hand",),
    ),
    Mutant(
        name="validator-callback-ema-swap-dropped",
        promise="with use_ema=True, ValidatorCallback scores (and a checkpoint after it saves) the averaged weights",
        file="adaptation/validation/callback.py",
        edits=(("        self._put_average_in()\n", ""),),
        tests=(
            T + "adaptation/test_validator_callback.py::"
            "test_with_ema_the_checkpoint_of_the_best_last_epoch_predicts_as_the_fitted_model",
        ),
    ),
)
