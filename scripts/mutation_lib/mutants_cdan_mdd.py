"""The curated mutants of CDAN's and MDD's promises: CDAN's multilinear map,
its entropy conditioning (on one device and under tf.distribute), MDD's margin,
trade-off and reversal. mutants.py assembles MUTANTS from these and the others.
"""

from __future__ import annotations

from mutation_lib.mutant import Mutant, T

CDAN_MDD_MUTANTS: tuple[Mutant, ...] = (
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
)
