"""The curated mutants of where each method's gradients flow (DANN, CDAN, CDAN+E,
MDD): a stop-gradient added or removed on each path, CDAN+E's entropy reversal
dropped or its lambda ignored, its normalizer differentiated. Each must fail
tests/adaptation/test_gradients.py, which derives the gradients by hand.
mutants.py assembles MUTANTS from these and the others.
"""

from __future__ import annotations

from mutation_lib.mutant import Mutant, T

GRADIENTS = T + "adaptation/test_gradients.py::"
DANN_GRADIENTS = GRADIENTS + "test_dann_gradients_equal_a_hand_computation"
CDAN_GRADIENTS = GRADIENTS + "test_cdan_gradients_equal_a_hand_computation"
MDD_GRADIENTS = GRADIENTS + "test_mdd_gradients_equal_a_hand_computation"

GRADIENT_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        name="objective-adversarial-term-sign",
        promise="every method's objective adds its weighted adversarial term (written once, in keras.ops, for every backend)",
        file="adaptation/objective.py",
        edits=(
            (
                'total = ops.cast(label_loss, "float32") + self._adversarial_weight() * scaled_term',
                'total = ops.cast(label_loss, "float32") - self._adversarial_weight() * scaled_term',
            ),
        ),
        tests=(DANN_GRADIENTS, CDAN_GRADIENTS, MDD_GRADIENTS),
    ),
    Mutant(
        name="domain-head-input-without-gradient",
        promise="DANN's and CDAN's features learn from the domain head, reversed (no stop-gradient before it)",
        file="adaptation/domain_head.py",
        edits=(
            (
                "self.domain_head(reverse(features, lambda_), training=True)",
                "self.domain_head(reverse(ops.stop_gradient(features), lambda_), training=True)",
            ),
        ),
        tests=(DANN_GRADIENTS, CDAN_GRADIENTS),
    ),
    Mutant(
        name="dann-label-head-input-without-gradient",
        promise="DANN's features learn from the label loss",
        file="adaptation/dann.py",
        edits=(
            (
                "self.label_head(features[:n_source], training=True)",
                "self.label_head(ops.stop_gradient(features[:n_source]), training=True)",
            ),
            (
                "from grad_reverse._keras import keras\n",
                "from grad_reverse._keras import keras\nfrom grad_reverse.backend_ops import ops\n",
            ),
        ),
        tests=(DANN_GRADIENTS,),
    ),
    Mutant(
        name="cdan-map-features-without-gradient",
        promise="CDAN's features learn from the domain head through the multilinear map",
        file="adaptation/cdan.py",
        edits=(
            (
                "mapped = self.conditioning_map(self._features_2d(features), conditioning)",
                "mapped = self.conditioning_map(ops.stop_gradient(self._features_2d(features)), conditioning)",
            ),
        ),
        tests=(CDAN_GRADIENTS,),
    ),
    Mutant(
        name="cdan-entropy-weights-without-gradient",
        promise="CDAN+E's entropy weights carry gradient into the label head and the features (the authors')",
        file="adaptation/cdan.py",
        edits=(
            (
                "weights = entropy_weights(probabilities, lambda_) if",
                "weights = entropy_weights(ops.stop_gradient(probabilities), lambda_) if",
            ),
        ),
        tests=(CDAN_GRADIENTS,),
    ),
    Mutant(
        name="cdan-entropy-not-reversed",
        promise="CDAN+E's entropy gradient is reversed (the label head and features make the weighted loss larger)",
        file="adaptation/cdan.py",
        edits=(("        entropy = reverse(entropy, lambda_)\n", "        entropy = entropy\n"),),
        tests=(CDAN_GRADIENTS,),
    ),
    Mutant(
        name="cdan-entropy-reversal-ignores-lambda",
        promise="CDAN+E's entropy gradient is reversed with the same lambda as the domain head's input",
        file="adaptation/cdan.py",
        edits=(("        entropy = reverse(entropy, lambda_)\n", "        entropy = reverse(entropy, 1.0)\n"),),
        tests=(CDAN_GRADIENTS,),
    ),
    Mutant(
        name="cdan-normalizer-differentiated",
        promise="CDAN+E's weight normalizers carry no gradient (the authors' detach)",
        file="adaptation/cdan.py",
        edits=(
            (
                "normalizer = ops.stop_gradient(mean_over_replicas(ops.sum(w)))",
                "normalizer = mean_over_replicas(ops.sum(w))",
            ),
        ),
        tests=(CDAN_GRADIENTS,),
    ),
    Mutant(
        name="cdan-default-scale-the-sum",
        promise="CDAN's default domain term is the authors' scale, half the sum of the domains' means",
        file="adaptation/cdan.py",
        edits=(("    DEFAULT_REDUCTION = MEAN_OVER_DOMAINS", "    DEFAULT_REDUCTION = 'sum_over_domains'"),),
        tests=(
            CDAN_GRADIENTS,
            T + "adaptation/test_cdan.py::test_the_default_term_is_the_authors_half_the_sum_of_the_domains_means",
        ),
    ),
    Mutant(
        name="mdd-adversary-input-without-gradient",
        promise="MDD's features learn from the adversarial head, reversed",
        file="adaptation/mdd.py",
        edits=(
            (
                "self.adversarial_head(reverse(features, lambda_), training=True)",
                "self.adversarial_head(reverse(ops.stop_gradient(features), lambda_), training=True)",
            ),
        ),
        tests=(MDD_GRADIENTS,),
    ),
    Mutant(
        name="mdd-regression-label-output-with-gradient",
        promise="MDD's regression disparity gives the label head no gradient (TLlib's y.detach())",
        file="adaptation/mdd.py",
        edits=(
            (
                'ops.abs(ops.cast(y_adv, "float32") - ops.stop_gradient(ops.cast(y, "float32")))',
                'ops.abs(ops.cast(y_adv, "float32") - ops.cast(y, "float32"))',
            ),
        ),
        tests=(GRADIENTS + "test_mdd_regression_gives_the_label_head_no_gradient_from_the_transfer_term",),
    ),
    Mutant(
        name="mdd-adversary-activation-unchecked",
        promise="an MDD adversarial head ending in another activation than the label head's is refused",
        file="adaptation/mdd.py",
        edits=(("    if label is not None and adversary is not None and label != adversary:", "    if False:"),),
        tests=(
            T
            + "adaptation/test_mdd.py::test_an_adversarial_head_with_another_last_activation_is_refused_at_construction",
        ),
    ),
)
