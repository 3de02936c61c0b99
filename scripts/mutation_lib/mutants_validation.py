"""The curated mutants of the choice without target labels: reverse
validation, the validators and their scores, select_without_labels. mutants.py
assembles MUTANTS from these and the others.
"""

from __future__ import annotations

from mutation_lib.mutant import Mutant, T

VALIDATION_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        name="reverse-validation-picks-the-worst",
        promise="select_by_reverse_validation picks the lowest reverse risk",
        file="adaptation/validation/reverse_validation.py",
        edits=(
            (
                "    return min(results, key=lambda c: results[c].risk), results",
                "    return max(results, key=lambda c: results[c].risk), results",
            ),
        ),
        tests=(
            T
            + "adaptation/test_dann_reverse_validation.py::test_selection_picks_the_candidate_with_the_lowest_reverse_risk",
        ),
    ),
    Mutant(
        name="reverse-validation-flips-the-pseudo-labels",
        promise="the reverse model learns the forward model's labeling of the target",
        file="adaptation/validation/reverse_validation.py",
        edits=(
            (
                "    reverse = _trained(make_model, seed, x_t, labels, x_s, fit_kwargs)",
                "    reverse = _trained(make_model, seed, x_t, 1 - labels, x_s, fit_kwargs)",
            ),
        ),
        tests=(
            T
            + "adaptation/test_dann_reverse_validation.py::test_a_configuration_that_cannot_learn_the_source_task_scores_worse_than_one_that_can",
            T
            + "adaptation/test_dann_reverse_validation.py::test_a_configuration_that_learns_labels_the_held_out_source_well_through_the_round_trip",
        ),
    ),
    Mutant(
        name="validator-sign-flipped",
        promise="every validator scores higher for better: DEV is its risk negated",
        file="adaptation/validation/one_model.py",
        edits=(
            (
                "        return -scores.deep_embedded_risk(weights, losses)\n",
                "        return scores.deep_embedded_risk(weights, losses)\n",
            ),
        ),
        tests=(T + "adaptation/test_validators.py::test_dev_reads_the_feature_extractor_on_a_model",),
    ),
    Mutant(
        name="dev-control-variate-dropped",
        promise="DEV's risk uses the importance weights as a control variate (You et al. 2019)",
        file="adaptation/validation/scores.py",
        edits=(
            (
                "    return float(np.mean(weighted) + eta * np.mean(weights) - eta)\n",
                "    return float(np.mean(weighted))\n",
            ),
        ),
        tests=(T + "adaptation/test_validators.py::test_deep_embedded_risk_uses_the_control_variate",),
    ),
    Mutant(
        name="snd-temperature-ignored",
        promise="SoftNeighborhoodDensity scores at the temperature it is given",
        file="adaptation/validation/one_model.py",
        edits=(
            (
                "scores.soft_neighborhood_density(points, self.temperature)",
                "scores.soft_neighborhood_density(points, 0.05)",
            ),
        ),
        tests=(T + "adaptation/test_validators.py::test_soft_neighborhood_density_reads_its_temperature",),
    ),
    Mutant(
        name="selection-leaves-out-the-plain-network",
        promise="select_without_labels chooses among all candidates, the plain network included (don't adapt)",
        file="adaptation/validation/selection.py",
        edits=(
            (
                "        chosen = min(candidates, key=lambda n: (-table[n][column], n != plain, n))\n",
                "        chosen = min((n for n in candidates if n != plain), key=lambda n: (-table[n][column], n))\n",
            ),
        ),
        tests=(
            T + "adaptation/test_validator_selection.py::"
            "test_the_selection_says_dont_adapt_when_the_plain_network_scores_highest",
        ),
    ),
    Mutant(
        name="ensemble-ignores-the-gate",
        promise="the gated ensemble holds the plain network and the candidates the source gate keeps, no others",
        file="adaptation/validation/selection.py",
        edits=(
            (
                "    kept, floor = rule.gate(accuracy, len(x_source), plain)\n",
                "    kept, floor = list(candidates), rule.gate(accuracy, len(x_source), plain)[1]\n",
            ),
        ),
        tests=(
            T + "adaptation/test_ensemble.py::"
            "test_the_gate_decides_who_joins_where_the_plain_network_is_not_the_most_accurate",
        ),
    ),
    Mutant(
        name="student-teaches-itself",
        promise="the Student's pseudo-labels are the teacher's, not its own predictions",
        file="adaptation/student.py",
        edits=(
            (
                "        teacher = teacher_log_probabilities(self.teacher(points, training=False))\n",
                "        teacher = teacher_log_probabilities(\n"
                "            self.label_head(self.feature_extractor(points, training=False), training=False)\n"
                "        )\n",
            ),
        ),
        tests=(
            T + "adaptation/test_student.py::"
            "test_the_student_follows_the_teacher_on_the_target_and_the_labels_on_the_source",
        ),
    ),
)
