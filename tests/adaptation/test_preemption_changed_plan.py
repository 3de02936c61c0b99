"""A resume that does not run the saved fit: killed with one plan (`epochs`,
`steps_per_epoch`) and resumed with another, the lambda ramp would jump at
the resume. The fit's plan is saved with the weights while it runs, and the
resumed fit warns naming both plans; without a saved plan, an optimizer
restored with fewer steps than the resumed epoch starts at warns the same.
The two runs of a changed plan train in subprocesses (about 10 s each pair);
the other ways, `slow`, as the marker says.
"""

from __future__ import annotations

import pytest

from grad_reverse._keras import KERAS_3, keras
from helpers import preemption
from helpers.models import dann, domains

SAVED_PLAN = pytest.mark.skipif(not KERAS_3, reason="the plan is saved beside the weights by Keras 3's saving only")


def kill_then_resume_with(tmp_path, killed: list[str], resumed: list[str], saving: tuple = ()) -> str:
    """Trains with `killed` until the start of epoch 3, resumes with `resumed`: the resume's stderr."""
    backup = str(tmp_path / "backup")
    common = ["--method", "dann", *saving, "--backup", backup]
    preemption.run([*common, *killed, "--out", str(tmp_path / "killed.npz"), "--kill", "3"], expect_killed=True)
    return preemption.run([*common, *resumed, "--out", str(tmp_path / "resumed.npz")])


@SAVED_PLAN
def test_a_resume_with_more_epochs_warns_naming_both_plans(tmp_path):
    stderr = kill_then_resume_with(tmp_path, ["--epochs", "6"], ["--epochs", "8"])
    assert "resumes at epoch 4 with epochs=8, steps_per_epoch=10 (80 steps)" in stderr
    assert "saved by a fit with epochs=6, steps_per_epoch=10 (60 steps)" in stderr


@SAVED_PLAN
def test_a_resume_with_more_steps_per_epoch_warns_naming_both_plans(tmp_path):
    stderr = kill_then_resume_with(tmp_path, ["--steps", "10"], ["--steps", "16"])
    assert "with epochs=6, steps_per_epoch=16 (96 steps), but the restored state was saved" in stderr
    assert "by a fit with epochs=6, steps_per_epoch=10 (60 steps)" in stderr


@pytest.mark.slow
@SAVED_PLAN
def test_a_resume_from_a_weights_checkpoint_with_another_plan_warns(tmp_path):
    """ModelCheckpoint(save_weights_only) during the fit, then build, load_weights, fit(initial_epoch=k)."""
    stderr = kill_then_resume_with(tmp_path, ["--epochs", "6"], ["--epochs", "5"], saving=("--resume-by", "weights"))
    assert "saved by a fit with epochs=6, steps_per_epoch=10 (60 steps)" in stderr


@pytest.mark.slow
def test_a_resume_with_the_same_plan_does_not_warn(tmp_path):
    stderr = kill_then_resume_with(tmp_path, ["--epochs", "6"], ["--epochs", "6"])
    assert "resumes at epoch" not in stderr
    assert "restored" not in stderr


def compiled_dann():
    model = dann()
    model.compile(keras.optimizers.Adam(0.01), "binary_crossentropy")
    return model


def fit(model, **kwargs):
    x_source, y_source, x_target = domains()
    model.fit(x_source, y_source, target=x_target, batch_size=16, seed=0, verbose=0, **kwargs)


def restored_from(path):
    model = compiled_dann()
    model(domains()[0][:1])
    model.build_optimizers()
    model.load_weights(path)
    return model


def test_weights_saved_after_the_fit_hold_no_plan_and_the_optimizers_steps_tell_a_changed_one(tmp_path):
    """Saved after `fit` returned (no plan inside), resumed at epoch 2 with 8 steps per epoch where
    the saved fit ran 5: the restored optimizer's 10 steps fall short of the epoch's start, 16."""
    model = compiled_dann()
    fit(model, steps_per_epoch=5, epochs=2)
    model.save_weights(tmp_path / "dann.weights.h5")
    with pytest.warns(UserWarning, match=r"resumes at epoch 3 \(step 16 with epochs=4, steps_per_epoch=8.*taken 10"):
        fit(restored_from(tmp_path / "dann.weights.h5"), steps_per_epoch=8, epochs=4, initial_epoch=2)


def test_a_resume_where_the_optimizers_steps_match_the_epochs_start_does_not_warn(tmp_path, recwarn):
    model = compiled_dann()
    fit(model, steps_per_epoch=5, epochs=2)
    model.save_weights(tmp_path / "dann.weights.h5")
    fit(restored_from(tmp_path / "dann.weights.h5"), steps_per_epoch=5, epochs=4, initial_epoch=2)
    assert not [w for w in recwarn if "DANN.fit" in str(w.message)]
