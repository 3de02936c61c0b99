"""The curated mutants of how every method trains: the loss scaled under mixed
precision, the lambda ramp and the batches continued after a resume. mutants.py
assembles MUTANTS from these and the others.
"""

from __future__ import annotations

from mutation_lib.mutant import Mutant, T

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
