"""The curated mutants of DANN's promises: the lambda schedule, the domain
head, DANNModel's objective and its per-part optimizers. mutants.py assembles
MUTANTS from these and the others.
"""

from __future__ import annotations

from mutation_lib.mutant import Mutant, T

DANN_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        name="schedule-counts-across-fits",
        promise="one DANNLambdaSchedule reused for a second fit restarts the ramp",
        file="schedule.py",
        edits=(
            ("        self._total = total\n        self._seen = 0\n", "        self._total = total\n"),
            ("        if self._steps_per_epoch is not None:\n", "        if False:\n"),
        ),
        tests=(T + "op/test_schedule.py::test_one_schedule_reused_for_a_second_fit_restarts_the_ramp",),
    ),
    Mutant(
        name="schedule-keeps-count-with-total-steps",
        promise="reused with total_steps on data of unknown length, the schedule restarts the ramp",
        file="schedule.py",
        edits=(("        self._total = total\n        self._seen = 0\n", "        self._total = total\n"),),
        tests=(
            T
            + "op/test_schedule.py::test_one_schedule_with_total_steps_reused_on_data_of_unknown_length_restarts_the_ramp",
        ),
    ),
    Mutant(
        name="schedule-ignores-initial-epoch",
        promise="a fit resumed with initial_epoch continues the ramp where it left off",
        file="schedule.py",
        edits=(
            (
                "            self._epoch_start = epoch * self._steps_per_epoch\n",
                "            self._epoch_start = self._seen\n",
            ),
        ),
        tests=(T + "op/test_schedule.py::test_a_fit_resumed_with_initial_epoch_continues_the_ramp",),
    ),
    Mutant(
        name="schedule-counts-callback-calls",
        promise="with steps_per_execution > 1 each value is the one of the execution's first step",
        file="schedule.py",
        edits=(
            (
                "self.value = dann_lambda(self.progress(batch), self.gamma, self.lambda_max)",
                "self._calls = getattr(self, '_calls', -1) + 1\n"
                "        self.value = dann_lambda(self.progress(self._calls), self.gamma, self.lambda_max)",
            ),
        ),
        tests=(T + "op/test_schedule.py::test_steps_per_execution_holds_each_lambda_for_its_steps",),
    ),
    Mutant(
        name="schedule-ramp-ends-early",
        promise="the ramp reaches ~lambda_max at the fit's last step, not after it",
        file="schedule.py",
        edits=(("max(self._total - 1, 1)", "max(self._total, 1)"),),
        tests=(T + "op/test_schedule.py::test_one_schedule_reused_for_a_second_fit_restarts_the_ramp",),
    ),
    Mutant(
        name="schedule-accepts-non-finite",
        promise="the schedule never assigns a non-finite lambda",
        file="schedule.py",
        edits=(
            ("        _check_ramp(float(gamma), float(lambda_max))\n        self.variable", "        self.variable"),
        ),
        tests=(T + "op/test_schedule.py::test_schedule_refuses_arguments_that_would_assign_a_non_finite_lambda",),
    ),
    Mutant(
        name="dann-domain-term-one-mean",
        promise="DANN's default domain term is the paper's: source mean + target mean, for any split",
        file="adaptation/domain_head.py",
        edits=(
            (
                "    both = ops.mean(per_point[:n_source]) + ops.mean(per_point[n_source:])",
                "    both = ops.mean(per_point)",
            ),
        ),
        tests=(
            T
            + "adaptation/test_dann_objective.py::test_the_logged_domain_term_equals_a_hand_computation_on_unequal_halves",
            T
            + "adaptation/test_dann_objective.py::test_the_trained_objective_weighs_the_domains_as_the_reduction_says",
        ),
    ),
    Mutant(
        name="dann-domain-term-half-sum",
        promise="DANN's default domain term is the paper's sum of the two means, not half of it",
        file="adaptation/domain_head.py",
        edits=(
            (
                "    return 0.5 * both if reduction == MEAN_OVER_DOMAINS else both",
                "    return 0.5 * both",
            ),
        ),
        tests=(
            T
            + "adaptation/test_dann_objective.py::test_the_logged_domain_term_equals_a_hand_computation_on_unequal_halves",
            T
            + "adaptation/test_dann_objective.py::test_the_trained_objective_weighs_the_domains_as_the_reduction_says",
        ),
    ),
    Mutant(
        name="dann-mean-over-batch-ignored",
        promise="domain_loss_reduction='mean_over_batch' trains one mean over the batch's points",
        file="adaptation/domain_head.py",
        edits=(
            (
                "    if reduction == MEAN_OVER_BATCH:\n        return ops.mean(per_point)",
                "    if False:\n        return ops.mean(per_point)",
            ),
        ),
        tests=(
            T
            + "adaptation/test_dann_objective.py::test_the_logged_domain_term_equals_a_hand_computation_on_unequal_halves",
            T
            + "adaptation/test_dann_objective.py::test_the_trained_objective_weighs_the_domains_as_the_reduction_says",
        ),
    ),
    Mutant(
        name="dann-no-reversal",
        promise="the paper's ramp makes the encoder domain-invariant (the domain gradient reaches it reversed)",
        file="adaptation/domain_head.py",
        edits=(
            (
                "self.domain_head(reverse(features, lambda_), training=True)",
                "self.domain_head(features, training=True)",
            ),
        ),
        tests=(T + "adaptation/test_dann_objective.py::test_the_papers_ramp_makes_the_encoder_domain_invariant",),
    ),
    Mutant(
        name="dann-part-scale-ignored",
        promise="a part's learning-rate scale multiplies the model's learning rate",
        file="adaptation/training/optimizers.py",
        edits=(
            (
                '        config["learning_rate"] = float(learning_rate) * scale',
                '        config["learning_rate"] = float(learning_rate)',
            ),
        ),
        tests=(
            T
            + "adaptation/test_dann_optimizers.py::test_a_zero_rate_for_the_feature_extractor_leaves_it_bitwise_unchanged_while_the_heads_move",
            T
            + "adaptation/test_dann_optimizers.py::test_a_scale_multiplies_the_parts_step_and_scale_one_equals_the_models_optimizer",
        ),
    ),
    Mutant(
        name="dann-part-optimizers-unused",
        promise="a part with its own optimizer is trained by it, not by the model's optimizer",
        file="adaptation/objective.py",
        edits=(
            (
                "        if not self._part_optimizers():\n            self.optimizer.apply_gradients",
                "        if True:\n            self.optimizer.apply_gradients",
            ),
        ),
        tests=(
            T
            + "adaptation/test_dann_optimizers.py::test_a_zero_rate_for_the_feature_extractor_leaves_it_bitwise_unchanged_while_the_heads_move",
            T + "adaptation/test_dann_optimizers.py::test_a_part_may_have_an_optimizer_of_its_own",
        ),
    ),
    Mutant(
        name="dann-part-optimizers-not-saved",
        promise="the .keras round trip restores every optimizer's state",
        file="adaptation/model.py",
        edits=(('"part_optimizers": self._part_optimizers() or None}', '"part_optimizers": None}'),),
        tests=(T + "adaptation/test_dann_optimizers.py::test_keras_file_round_trip_restores_every_optimizers_state",),
    ),
)
