"""The curated mutants of how every method trains: the loss scaled under mixed
precision, the JAX and PyTorch steps (lambda reaching the adversary, no
gradient left from the step before: each checked under its own backend), the
lambda ramp and the batches continued after a resume. mutants.py assembles
MUTANTS from these and the others.
"""

from __future__ import annotations

from mutation_lib.mutant import Mutant, T

# The functional bars on JAX and PyTorch (tests/backends/, run by .ci/run's step 5b).
BITE = T + "backends/test_models_adapt.py::"

TRAINING_MUTANTS: tuple[Mutant, ...] = (
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
        name="torch-gradients-accumulate",
        promise="on PyTorch each step applies its own batch's gradient, none left from the step before",
        file="adaptation/training/torch.py",
        edits=(("    model.zero_grad()\n", ""),),
        tests=(BITE + "test_each_step_applies_its_own_batchs_gradient_and_nothing_from_the_step_before[dann]",),
        backend="torch",
    ),
    Mutant(
        name="jax-step-drops-lambda",
        promise="on JAX the step's lambda reaches the adversary (the fit adapts, the logged lambda ramps either way)",
        file="adaptation/training/jax.py",
        edits=(
            (
                "model.objective(x_source, x_target, y_source, sample_weight, lambda_)",
                "model.objective(x_source, x_target, y_source, sample_weight, 0.0 * lambda_)",
            ),
        ),
        tests=(BITE + "test_the_adversary_moves_the_features_away_from_the_plain_networks[dann]",),
        backend="jax",
    ),
    Mutant(
        name="torch-step-drops-lambda",
        promise="on PyTorch the step's lambda reaches the adversary (the fit adapts, the logged lambda ramps either way)",
        file="adaptation/training/torch.py",
        edits=(
            (
                "model.objective(x_source, x_target, y_source, sample_weight, lambda_)",
                "model.objective(x_source, x_target, y_source, sample_weight, 0.0 * lambda_)",
            ),
        ),
        tests=(BITE + "test_the_adversary_moves_the_features_away_from_the_plain_networks[dann]",),
        backend="torch",
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
)
