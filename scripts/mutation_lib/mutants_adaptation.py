"""The curated mutants of the domain-adaptation promises: the DANN lambda
schedule, the domain head, DANNModel's objective and per-part optimizers,
reverse validation, CDAN and MDD. mutant.py defines Mutant; mutants.py assembles
MUTANTS from these and its own.
"""

from __future__ import annotations

from mutation_lib.mutant import Mutant, T

ADAPTATION_MUTANTS: tuple[Mutant, ...] = (
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
        file="adaptation/model.py",
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
        name="cdan-probabilities-with-gradient",
        promise="CDAN(map_gradient=False)'s class probabilities enter the multilinear map without gradient",
        file="adaptation/cdan.py",
        edits=(
            (
                "conditioning = probabilities if self.map_gradient else ops.stop_gradient(probabilities)",
                "conditioning = probabilities",
            ),
        ),
        tests=(
            T + "adaptation/test_cdan.py::test_the_class_probabilities_carry_no_gradient_into_the_label_head",
            T + "adaptation/test_gradients.py::test_cdan_gradients_equal_a_hand_computation",
            T
            + "adaptation/test_cdan.py::test_map_gradient_sends_the_reversed_domain_gradient_through_the_probabilities[False]",
        ),
    ),
    Mutant(
        name="cdan-map-gradient-ignored",
        promise="CDAN(map_gradient=True) differentiates the map's class probabilities",
        file="adaptation/cdan.py",
        edits=(
            (
                "conditioning = probabilities if self.map_gradient else ops.stop_gradient(probabilities)",
                "conditioning = ops.stop_gradient(probabilities)",
            ),
        ),
        tests=(
            T
            + "adaptation/test_cdan.py::test_map_gradient_sends_the_reversed_domain_gradient_through_the_probabilities[True]",
            T
            + "adaptation/test_cdan.py::test_map_gradient_sends_the_reversed_domain_gradient_through_the_probabilities[default]",
        ),
    ),
    Mutant(
        name="cdan-map-gradient-off-by-default",
        promise="CDAN differentiates the map's class probabilities by default (map_gradient=True)",
        file="adaptation/cdan.py",
        edits=(("        map_gradient: bool = True,", "        map_gradient: bool = False,"),),
        tests=(
            T
            + "adaptation/test_cdan.py::test_map_gradient_sends_the_reversed_domain_gradient_through_the_probabilities[default]",
        ),
    ),
    Mutant(
        name="cdan-entropy-weights-not-normalized",
        promise="CDAN+E's entropy weights are normalized within each domain (over the batch for mean_over_batch)",
        file="adaptation/cdan.py",
        edits=(
            (
                "return ops.sum(w * losses) / normalizer",
                'return ops.sum(w * losses) / ops.cast(ops.size(w), "float32")',
            ),
        ),
        tests=(
            T
            + "adaptation/test_cdan.py::test_the_multilinear_domain_term_equals_a_hand_computation[sum_over_domains-True]",
            T
            + "adaptation/test_cdan.py::test_the_multilinear_domain_term_equals_a_hand_computation[mean_over_batch-True]",
            T + "adaptation/test_cdan.py::test_a_binary_sigmoid_head_works_as_two_classes",
        ),
    ),
    Mutant(
        name="cdan-entropy-conditioning-ignored",
        promise="CDAN+E weighs each point's domain loss by 1 + exp(-H(g))",
        file="adaptation/cdan.py",
        edits=(
            (
                "weights = entropy_weights(probabilities, lambda_) if self.entropy_conditioning else None",
                "weights = None",
            ),
        ),
        tests=(
            T
            + "adaptation/test_cdan.py::test_the_multilinear_domain_term_equals_a_hand_computation[sum_over_domains-True]",
            T + "adaptation/test_cdan.py::test_a_binary_sigmoid_head_works_as_two_classes",
        ),
    ),
    Mutant(
        name="cdan-map-ignores-the-probabilities",
        promise="CDAN's domain head sees the multilinear map of the features and the class probabilities",
        file="adaptation/cdan.py",
        edits=(
            (
                "outer = probabilities[:, :, None] * features[:, None, :]",
                "outer = ops.ones_like(probabilities)[:, :, None] * features[:, None, :]",
            ),
        ),
        tests=(
            T
            + "adaptation/test_cdan.py::test_the_multilinear_domain_term_equals_a_hand_computation[sum_over_domains-False]",
        ),
    ),
    Mutant(
        name="cdan-entropy-weights-normalized-per-replica",
        promise="under tf.distribute CDAN+E normalizes its weights over the global batch, not each replica's share",
        file="backend_ops.py",
        edits=(
            (
                "    if context is None or context.num_replicas_in_sync == 1:\n        return value",
                "    if True:\n        return value",
            ),
        ),
        tests=(
            T
            + "adaptation/test_cdan_mdd_distribute.py::test_mirrored_fit_equals_one_device_on_the_same_global_batches",
        ),
    ),
    Mutant(
        name="mixed-precision-loss-not-scaled",
        promise="under mixed_float16 every method's step scales the loss (Keras 3), so the step is not shrunk",
        file="adaptation/training/tensorflow.py",
        edits=(("    return model.optimizer.scale_loss(loss) if KERAS_3 else loss", "    return loss"),),
        tests=(
            T
            + "adaptation/test_dann_model.py::test_mixed_precision_trains_with_float16_features_and_reverses_the_gradient",
        ),
    ),
    Mutant(
        name="mdd-margin-ignored",
        promise="MDD's transfer term weighs the source disparity by the margin factor gamma",
        file="adaptation/mdd.py",
        edits=(
            (
                "transfer = self.margin * ops.mean(source) - ops.mean(target)",
                "transfer = ops.mean(source) - ops.mean(target)",
            ),
        ),
        tests=(
            T
            + "adaptation/test_mdd.py::test_the_transfer_term_equals_a_hand_computation[3-softmax-sparse_categorical_crossentropy]",
        ),
    ),
    Mutant(
        name="mdd-trade-off-ignored",
        promise="MDD's objective is label loss + trade_off * transfer term",
        file="adaptation/mdd.py",
        edits=(("        return self.trade_off\n", "        return 1.0\n"),),
        tests=(T + "adaptation/test_mdd.py::test_the_trade_off_weighs_the_adversarys_step",),
    ),
    Mutant(
        name="mdd-no-reversal",
        promise="MDD's adversarial head sees the features through GradReverse",
        file="adaptation/mdd.py",
        edits=(
            (
                "self.adversarial_head(reverse(features, lambda_), training=True)",
                "self.adversarial_head(features, training=True)",
            ),
        ),
        tests=(T + "adaptation/test_mdd.py::test_the_feature_extractor_learns_the_transfer_term_through_the_reversal",),
    ),
    Mutant(
        name="ramp-restarts-on-resume",
        promise="a fit resumed by BackupAndRestore continues the lambda ramp at the epoch Keras restores",
        file="adaptation/training/resume.py",
        edits=(("        model._schedule.step.assign(start)\n", ""),),
        tests=(
            T + "adaptation/test_preemption.py::"
            "test_fit_killed_at_an_epoch_start_and_resumed_by_backup_and_restore_ends_bitwise_equal[dann-ema-lr-schedule]",
        ),
    ),
    Mutant(
        name="batches-restart-on-resume",
        promise="a fit resumed by BackupAndRestore draws the batches the uninterrupted fit would draw",
        file="adaptation/training/resume.py",
        edits=(("            self.position.assign(start)\n", "            pass\n"),),
        tests=(
            T + "adaptation/test_preemption.py::"
            "test_fit_killed_at_an_epoch_start_and_resumed_by_backup_and_restore_ends_bitwise_equal[dann-ema-lr-schedule]",
        ),
    ),
    Mutant(
        name="validator-sign-flipped",
        promise="every validator scores higher for better: DEV is its risk negated",
        file="adaptation/validation/validators.py",
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
        file="adaptation/validation/validators.py",
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
                "    best = plain\n    for name in candidates:\n",
                "    best = next(n for n in candidates if n != plain)\n    for name in candidates:\n        if name == plain:\n            continue\n",
            ),
        ),
        tests=(
            T + "adaptation/test_validator_selection.py::"
            "test_the_selection_says_dont_adapt_when_the_plain_network_scores_highest",
        ),
    ),
)
