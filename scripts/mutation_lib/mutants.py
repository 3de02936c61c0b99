"""The curated mutants: one or more per promised behaviour of the package.

Each mutant breaks one promise with the smallest edit that does it, and names
the tests that must fail when it is applied. Most edit the installed package;
a few edit the source tree's C++ (tree=SOURCE), whose tests build a program
from it. An edit's original text must
occur exactly once in its file: when the code changes, the check stops with
"drifted" instead of silently testing nothing, and the mutant is rewritten
against the new code (see docs/testing.md).
"""

from __future__ import annotations

from dataclasses import dataclass


PACKAGE = "package"  # a file of the grad_reverse package (built libraries included)
SOURCE = "source"  # a file of the source tree's cc/, which the selected tests build
# (they run without tests/conftest.py, so without TensorFlow)


@dataclass(frozen=True)
class Mutant:
    name: str
    promise: str  # what the package promises that this edit breaks
    file: str  # relative to the grad_reverse package directory, or to the repository for SOURCE
    edits: tuple[tuple[str, str], ...]  # (original text, replacement), applied in order
    tests: tuple[str, ...]  # pytest node ids (or files) that must fail
    needs: str = ""  # a build-record key that must be true for the edit to change anything
    pending: str = ""  # a known survivor: why, and what will kill it
    tree: str = PACKAGE


T = "tests/"

MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        name="servable-gate-ignores-differences",
        promise="make-servable stops with NotServableError when a signature's outputs differ",
        file="serving/servable.py",
        edits=(
            ("failed = [r for r in report.verified if r.status in (verify.DIFFERENT, verify.FAILED)]", "failed = []"),
        ),
        tests=(
            T + "serving/test_serving_gate.py::test_signature_that_differs_stops_with_not_servable_error",
            T + "serving/test_serving_gate.py::test_signature_that_differs_exits_1_with_no_dst",
        ),
    ),
    Mutant(
        name="servable-gate-counts-unrun-signatures-as-equal",
        promise="a signature make-servable could not run is not proven equal: the run stops unless allowed",
        file="serving/servable.py",
        edits=(("if report.unverified and not allow_unverified:", "if False:"),),
        tests=(T + "serving/test_serving_gate.py::test_string_input_signature_is_not_run_and_stops_the_run",),
    ),
    Mutant(
        name="overwrite-replaces-any-folder",
        promise="--overwrite replaces only a SavedModel or an empty folder; a folder of other files is refused",
        file="serving/servable.py",
        edits=(("if not any_directory and not _is_saved_model(dst) and any(dst.iterdir()):", "if False:"),),
        tests=(
            T + "serving/test_serving_bad_inputs.py::"
            "test_overwrite_refuses_a_folder_that_is_not_a_saved_model_and_names_what_is_in_it",
        ),
    ),
    Mutant(
        name="damaged-variable-data-not-read",
        promise="a SavedModel whose variable data fails its checksum is a bad SRC (exit 2), even with --no-verify",
        file="serving/integrity.py",
        edits=(("    _check_variable_contents(Path(path), proto)\n", ""),),
        tests=(
            T + "serving/test_serving_corrupt.py::"
            "test_make_servable_exits_2_with_one_line_and_writes_nothing[variables_data_byte_flipped-no_verify]",
        ),
    ),
    Mutant(
        name="backward-switch-ignored",
        promise="GRAD_REVERSE_BACKWARD=stock builds the gradient from stock ops only",
        file="ops.py",
        edits=(
            (
                "_library.grad_reverse_grad if BACKWARD.kernel == _backward.NATIVE else _backward.stock_reverse",
                "_library.grad_reverse_grad",
            ),
        ),
        tests=(
            T
            + "op/test_backward.py::test_gradient_graph_holds_grad_reverse_grad_in_native_mode_and_only_stock_ops_in_stock_mode",
        ),
    ),
    Mutant(
        name="stock-backward-rounds-twice",
        promise="the stock backward rounds half/bfloat16 like the kernels: computed in float32, rounded once",
        file="_backward.py",
        edits=(
            (
                "    wide = tf.raw_ops.Mul(x=tf.raw_ops.Cast(x=dy, DstT=tf.float32), y=scale)\n"
                "    return tf.raw_ops.Cast(x=wide, DstT=dtype, Truncate=False)",
                "    return tf.raw_ops.Mul(x=dy, y=tf.raw_ops.Cast(x=scale, DstT=dtype))",
            ),
        ),
        tests=(T + "op/test_backward.py::test_stock_backward_equals_the_kernel_bitwise_for_every_16_bit_value",),
    ),
    Mutant(
        name="xla-always-falls-back",
        promise="under XLA the library's own kernels are used where the build has them",
        file="_xla.py",
        edits=(("    if not missing:\n        return False\n", ""),),
        tests=(
            T + "op/test_xla.py::test_xla_compiles_the_native_op_exactly_when_the_build_has_xla_kernels",
            T + "op/test_xla.py::test_keras_layer_under_xla_uses_the_native_op_when_the_build_has_xla_kernels",
        ),
        needs="xla",
    ),
    Mutant(
        name="xla-never-falls-back",
        promise="a build without XLA kernels falls back to the pure-Python version inside XLA",
        file="_xla.py",
        edits=(("    if not in_xla_context():\n        return False\n", "    return False\n"),),
        tests=(T + "op/test_xla.py::test_without_native_xla_kernels_falls_back_to_the_reference_with_one_warning",),
    ),
    Mutant(
        name="op-always-pure-python",
        promise="grad_reverse() runs the native op outside XLA",
        file="ops.py",
        edits=(("if _xla.use_fallback(BUILD_INFO):", "if True:"),),
        tests=(T + "op/test_layer.py::test_training_false_returns_the_input_without_the_op",),
    ),
    Mutant(
        name="indexed-slices-densified",
        promise="an IndexedSlices gradient stays IndexedSlices through the reversal",
        file="ops.py",
        edits=(("if isinstance(dy, tf.IndexedSlices):", "if False:"),),
        tests=(T + "op/test_op.py::test_indexed_slices_gradient_stays_sparse_and_reversed",),
    ),
    Mutant(
        name="layer-without-reversal",
        promise="the Keras layer reverses the gradient reaching the feature extractor in fit",
        file="layer.py",
        edits=(("return grad_reverse(inputs, self.lambda_)", "return inputs"),),
        tests=(T + "op/test_layer.py::test_dann_fit_runs_and_reverses_the_domain_gradient",),
    ),
    Mutant(
        name="layer-accepts-non-finite-lambda",
        promise="the layer refuses a non-finite lambda when it is given (constructor or assignment)",
        file="layer.py",
        edits=(("            check_finite_lambda(lambda_)\n", ""),),
        tests=(T + "op/test_nonfinite_lambda.py::test_layer_refuses_a_non_finite_number_or_eager_tensor",),
    ),
    Mutant(
        name="layer-accepts-a-lambda-of-the-wrong-kind",
        promise="the layer refuses None, a string or a non-scalar lambda at construction, naming what is accepted",
        file="layer.py",
        edits=(("            check_lambda_kind(lambda_)\n", ""),),
        tests=(T + "op/test_layer.py::test_the_layer_refuses_a_lambda_of_the_wrong_kind_or_shape_at_construction",),
    ),
    Mutant(
        name="backward-not-switched-in-process",
        promise="options.set_backward changes the gradient built after it",
        file="options.py",
        edits=(("        ops.use_backward()\n", "        pass\n"),),
        tests=(T + "op/test_options.py::test_set_backward_switches_the_gradient_built_after_it",),
    ),
    Mutant(
        name="serving-paths-checked-after-tensorflow-loads",
        promise="check-serving and make-servable report a missing path before TensorFlow loads",
        file="__main__.py",
        edits=(("    if preflight is not None:", "    if False:"),),
        tests=(T + "cli/test_cli.py::test_a_bad_serving_path_is_reported_before_tensorflow_loads",),
    ),
    Mutant(
        name="loader-skips-version-check",
        promise="a library built for another TensorFlow is an ImportError before it is loaded",
        file="_loader.py",
        edits=(("    if not stable and series(str(built)) != series(running):\n", "    if False:\n"),),
        tests=(T + "op/test_loader.py::test_version_mismatch_names_both_versions_before_loading",),
    ),
    Mutant(
        name="schedule-counts-across-fits",
        promise="one DANNLambdaSchedule reused for a second fit restarts the ramp",
        file="schedule.py",
        edits=(
            ("        self._total = total\n        self._seen = 0\n", "        self._total = total\n"),
            ("        if self._steps_per_epoch is not None:\n", "        if False:\n"),
        ),
        tests=(T + "adaptation/test_schedule.py::test_one_schedule_reused_for_a_second_fit_restarts_the_ramp",),
    ),
    Mutant(
        name="schedule-keeps-count-with-total-steps",
        promise="reused with total_steps on data of unknown length, the schedule restarts the ramp",
        file="schedule.py",
        edits=(("        self._total = total\n        self._seen = 0\n", "        self._total = total\n"),),
        tests=(
            T
            + "adaptation/test_schedule.py::test_one_schedule_with_total_steps_reused_on_data_of_unknown_length_restarts_the_ramp",
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
        tests=(T + "adaptation/test_schedule.py::test_a_fit_resumed_with_initial_epoch_continues_the_ramp",),
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
        tests=(T + "adaptation/test_schedule.py::test_steps_per_execution_holds_each_lambda_for_its_steps",),
    ),
    Mutant(
        name="schedule-ramp-ends-early",
        promise="the ramp reaches ~lambda_max at the fit's last step, not after it",
        file="schedule.py",
        edits=(("max(self._total - 1, 1)", "max(self._total, 1)"),),
        tests=(T + "adaptation/test_schedule.py::test_one_schedule_reused_for_a_second_fit_restarts_the_ramp",),
    ),
    Mutant(
        name="schedule-accepts-non-finite",
        promise="the schedule never assigns a non-finite lambda",
        file="schedule.py",
        edits=(
            ("        _check_ramp(float(gamma), float(lambda_max))\n        self.variable", "        self.variable"),
        ),
        tests=(
            T + "adaptation/test_schedule.py::test_schedule_refuses_arguments_that_would_assign_a_non_finite_lambda",
        ),
    ),
    Mutant(
        name="rewrite-keeps-forward-op",
        promise="make-servable leaves no GradReverse node in the copy",
        file="serving/rewrite.py",
        edits=(("        if node.op not in REPLACED_OP_TYPES:\n", "        if node.op != BACKWARD:\n"),),
        tests=(T + "serving/test_rewrite_in_memory.py",),
    ),
    Mutant(
        name="rewrite-gradient-not-negated",
        promise="a rewritten GradReverseGrad computes -lambda * dy with the kernel's rounding",
        file="serving/rewrite.py",
        edits=(('add("neg_lambda", "Neg", [lambda_]', 'add("neg_lambda", "Identity", [lambda_]'),),
        tests=(T + "serving/test_rewrite_in_memory.py",),
    ),
    Mutant(
        name="dann-domain-term-one-mean",
        promise="DANN's default domain term is the paper's: source mean + target mean, for any split",
        file="adaptation/domain_head.py",
        edits=(
            (
                "    return tf.reduce_mean(per_point[:n_source]) + tf.reduce_mean(per_point[n_source:])",
                "    return tf.reduce_mean(per_point)",
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
                "    return tf.reduce_mean(per_point[:n_source]) + tf.reduce_mean(per_point[n_source:])",
                "    return 0.5 * (tf.reduce_mean(per_point[:n_source]) + tf.reduce_mean(per_point[n_source:]))",
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
                "    if reduction == MEAN_OVER_BATCH:\n        return tf.reduce_mean(per_point)",
                "    if False:\n        return tf.reduce_mean(per_point)",
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
        file="adaptation/model.py",
        edits=(
            (
                "self.domain_head(grad_reverse(features, lambda_), training=True)",
                "self.domain_head(features, training=True)",
            ),
        ),
        tests=(T + "adaptation/test_dann_objective.py::test_the_papers_ramp_makes_the_encoder_domain_invariant",),
    ),
    Mutant(
        name="dann-part-scale-ignored",
        promise="a part's learning-rate scale multiplies the model's learning rate",
        file="adaptation/optimizers.py",
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
                "        if self._part_optimizers():\n            apply_per_optimizer",
                "        if False:\n            apply_per_optimizer",
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
        file="adaptation/reverse_validation.py",
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
        file="adaptation/reverse_validation.py",
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
        name="cuda-tail-off-by-one",
        promise="the CUDA kernel's scalar tail writes the last elements and nothing past them",
        file="cc/compute/grad_reverse_cuda_body.h",
        edits=(("  if (tid < plan.tail) {", "  if (tid <= plan.tail) {"),),
        tests=(T + "packaging/test_cuda_emulated.py::test_every_case_of_the_emulated_grid_equals_the_cpu_kernel",),
        tree=SOURCE,
    ),
    Mutant(
        name="cuda-head-counted-in-bytes",
        promise="the CUDA kernel's scalar head counts elements up to 16-byte alignment",
        file="cc/compute/grad_reverse_cuda_plan.h",
        edits=(
            (
                "(kCudaVectorBytes - static_cast<int64_t>(in_offset)) / element_size;",
                "(kCudaVectorBytes - static_cast<int64_t>(in_offset));",
            ),
        ),
        tests=(T + "packaging/test_cuda_emulated.py::test_every_case_of_the_emulated_grid_equals_the_cpu_kernel",),
        tree=SOURCE,
    ),
    Mutant(
        name="cuda-vector-loop-ignores-the-grid-stride",
        promise="the CUDA kernel's vector loop steps by the whole grid, so each vector is scaled once",
        file="cc/compute/grad_reverse_cuda_body.h",
        edits=(
            (
                "  for (int64_t i = tid; i < plan.vectors; i += stride) {",
                "  for (int64_t i = tid; i < plan.vectors; i += kCudaBlockSize) {",
            ),
        ),
        tests=(T + "packaging/test_cuda_emulated.py::test_every_case_of_the_emulated_grid_equals_the_cpu_kernel",),
        tree=SOURCE,
    ),
    Mutant(
        name="cdan-probabilities-with-gradient",
        promise="CDAN's class probabilities enter the multilinear map without gradient",
        file="adaptation/cdan.py",
        edits=(("probabilities = tf.stop_gradient(tf.exp(log_p))", "probabilities = tf.exp(log_p)"),),
        tests=(T + "adaptation/test_cdan.py::test_the_class_probabilities_carry_no_gradient_into_the_label_head",),
    ),
    Mutant(
        name="cdan-entropy-weights-not-normalized",
        promise="CDAN+E's entropy weights are normalized within each domain (over the batch for mean_over_batch)",
        file="adaptation/cdan.py",
        edits=(
            (
                "return tf.reduce_sum(w * losses) / mean_over_replicas(tf.reduce_sum(w))",
                "return tf.reduce_sum(w * losses) / tf.cast(tf.size(w), tf.float32)",
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
        edits=(("weights = entropy_weights(probabilities) if self.entropy_conditioning else None", "weights = None"),),
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
                "outer = tf.ones_like(probabilities)[:, :, None] * features[:, None, :]",
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
        file="adaptation/cdan.py",
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
        file="adaptation/model.py",
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
                "transfer = self.margin * tf.reduce_mean(source) - tf.reduce_mean(target)",
                "transfer = tf.reduce_mean(source) - tf.reduce_mean(target)",
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
                "self.adversarial_head(grad_reverse(features, lambda_), training=True)",
                "self.adversarial_head(features, training=True)",
            ),
        ),
        tests=(T + "adaptation/test_mdd.py::test_the_feature_extractor_learns_the_transfer_term_through_the_reversal",),
    ),
    Mutant(
        name="auto-never-chooses-the-stable-library",
        promise="a TensorFlow without a C++ library of its own (a newer release) loads the stable-ABI library",
        file="_library_choice.py",
        edits=(("    if mode == RELEASE or own.is_dir() or not stable_held:", "    if True:"),),
        tests=(
            T + "op/test_stable_library.py::"
            "test_auto_takes_the_stable_library_for_a_newer_tensorflow_and_says_what_it_costs",
        ),
    ),
    Mutant(
        name="stable-threads-ignore-tensorflows-intra-op-setting",
        promise="the stable library runs no more CPU threads than TensorFlow's intra-op setting",
        file="_library_calls.py",
        edits=(
            (
                "    if threads > 0:\n        handle.GradReverseSetMaxThreads",
                "    if False:\n        handle.GradReverseSetMaxThreads",
            ),
        ),
        tests=(
            T + "op/test_stable_library.py::test_the_stable_library_shards_a_large_backward_bitwise_as_the_reference",
        ),
    ),
    Mutant(
        name="missing-c-function-reported-as-a-damaged-install",
        promise="a TensorFlow lacking a C function the stable library imports is an ImportError naming it",
        file="_loader.py",
        edits=(("        if stable and missing:", "        if False:"),),
        tests=(T + "op/test_stable_library.py::test_a_tensorflow_lacking_a_c_function_is_an_import_error_naming_it",),
    ),
)
