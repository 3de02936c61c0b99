"""The curated mutants: one or more per promised behaviour of the package.

Each mutant breaks one promise with the smallest edit that does it, and names
the tests that must fail when it is applied. Most edit the installed package;
a few edit the source tree's C++ (tree=SOURCE), whose tests build a program
from it. An edit's original text must
occur exactly once in its file: when the code changes, the check stops with
"drifted" instead of silently testing nothing, and the mutant is rewritten
against the new code (see docs/testing.md).

This module holds the mutants of the op, the layer, the loader,
serving and the CUDA source; the domain-adaptation promises have files by
topic: mutants_dann.py (the schedule, DANN), mutants_cdan_mdd.py,
mutants_training.py (how every method trains, on every backend),
mutants_validation.py (the choice without target labels), mutants_validators.py
(EnsV, MixVal, the validator callback's EMA weights) and
mutants_gradients.py (where the gradients flow); MUTANTS is all of them.
"""

from __future__ import annotations

from mutation_lib.mutant import PACKAGE, SOURCE, Mutant, T
from mutation_lib.mutants_cdan_mdd import CDAN_MDD_MUTANTS
from mutation_lib.mutants_dann import DANN_MUTANTS
from mutation_lib.mutants_gradients import GRADIENT_MUTANTS
from mutation_lib.mutants_training import TRAINING_MUTANTS
from mutation_lib.mutants_validation import VALIDATION_MUTANTS
from mutation_lib.mutants_validators import VALIDATOR_MUTANTS

__all__ = ["MUTANTS", "PACKAGE", "SOURCE", "Mutant"]

OP_AND_SERVING_MUTANTS: tuple[Mutant, ...] = (
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
        file="serving/destination.py",
        edits=(("if not any_directory and not is_saved_model(dst) and any(dst.iterdir()):", "if False:"),),
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
                "_library.grad_reverse_grad if BACKWARD.kernel == NATIVE else backward_choice.stock_reverse",
                "_library.grad_reverse_grad",
            ),
        ),
        tests=(
            T
            + "op/test_backward_modes_and_stock.py::test_gradient_graph_holds_grad_reverse_grad_in_native_mode_and_only_stock_ops_in_stock_mode",
        ),
    ),
    Mutant(
        name="stock-backward-rounds-twice",
        promise="the stock backward rounds half/bfloat16 like the kernels: computed in float32, rounded once",
        file="_native/backward_choice.py",
        edits=(
            (
                "    wide = tf.raw_ops.Mul(x=tf.raw_ops.Cast(x=dy, DstT=tf.float32), y=scale)\n"
                "    return tf.raw_ops.Cast(x=wide, DstT=dtype, Truncate=False)",
                "    return tf.raw_ops.Mul(x=dy, y=tf.raw_ops.Cast(x=scale, DstT=dtype))",
            ),
        ),
        tests=(
            T
            + "op/test_backward_modes_and_stock.py::test_stock_backward_equals_the_kernel_bitwise_for_every_16_bit_value",
        ),
    ),
    Mutant(
        name="xla-always-falls-back",
        promise="under XLA the library's own kernels are used where the build has them",
        file="_native/xla_fallback.py",
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
        file="_native/xla_fallback.py",
        edits=(("    if not in_xla_context():\n        return False\n", "    return False\n"),),
        tests=(T + "op/test_xla.py::test_without_native_xla_kernels_falls_back_to_the_reference_with_one_warning",),
    ),
    Mutant(
        name="op-always-pure-python",
        promise="grad_reverse() runs the native op outside XLA",
        file="ops.py",
        edits=(("if xla_fallback.use_fallback(BUILD_INFO):", "if True:"),),
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
        name="streaming-stores-not-forced-in-process",
        promise="options.set_streaming_stores forces the stores the library's large backward passes use",
        file="options.py",
        edits=(("    calls.set_streaming_stores(_loaded_library(), mode)\n", "    pass\n"),),
        tests=(T + "op/test_streaming_stores.py::test_a_choice_forced_at_run_time_is_what_the_kernel_uses",),
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
        file="_native/loader.py",
        edits=(("    if not stable and series(str(built)) != series(running):\n", "    if False:\n"),),
        tests=(T + "op/test_loader.py::test_version_mismatch_names_both_versions_before_loading",),
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
        name="auto-never-chooses-the-stable-library",
        promise="a TensorFlow without a C++ library of its own (a newer release) loads the stable-ABI library",
        file="_native/choice.py",
        edits=(("    if mode == RELEASE or own.is_dir() or not stable_held:", "    if True:"),),
        tests=(
            T + "op/test_stable_library.py::"
            "test_auto_takes_the_stable_library_for_a_newer_tensorflow_and_says_what_it_costs",
        ),
    ),
    Mutant(
        name="stable-threads-ignore-tensorflows-intra-op-setting",
        promise="the stable library runs no more CPU threads than TensorFlow's intra-op setting",
        file="_native/calls.py",
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
        file="_native/loader.py",
        edits=(("        if stable and missing:", "        if False:"),),
        tests=(T + "op/test_stable_library.py::test_a_tensorflow_lacking_a_c_function_is_an_import_error_naming_it",),
    ),
    Mutant(
        name="cpp-library-abi-mismatch-never-falls-back",
        promise="in auto, a C++ library refused for an undefined symbol is replaced by the stable-ABI library",
        file="_native/loader.py",
        edits=(("        if choice is not None and choice.fallback is not None and undefined:", "        if False:"),),
        tests=(
            T + "op/test_loader.py::"
            "test_a_cpp_library_needing_a_missing_cpp_symbol_falls_back_to_the_stable_library_in_auto[auto]",
        ),
    ),
    Mutant(
        name="library-handle-made-again",
        promise="the op library is loaded once, into the one handle every caller gets",
        file="_native/loader.py",
        edits=(("    if _loaded is None:\n        _loaded = load_library()", "    _loaded = load_library()"),),
        tests=(T + "op/test_loader.py::test_library_is_loaded_once_and_its_record_matches",),
    ),
)

MUTANTS: tuple[Mutant, ...] = (
    OP_AND_SERVING_MUTANTS
    + DANN_MUTANTS
    + CDAN_MDD_MUTANTS
    + TRAINING_MUTANTS
    + VALIDATION_MUTANTS
    + VALIDATOR_MUTANTS
    + GRADIENT_MUTANTS
)
