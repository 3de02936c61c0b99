"""`DANN`, `CDAN` (both maps, CDAN+E) and `MDD` on Keras' JAX and PyTorch backends,
without TensorFlow: the README's "DANN in ten lines" with `import keras`, the
other methods' fits, evaluate, predict, the logged metrics, the `.keras` round
trip, per-part optimizers, and the clear errors for what is TensorFlow's.

The objective's numbers are tests/adaptation/test_gradients.py's (run on these
backends too); resume after preemption is test_models_resume.py's; on
TensorFlow the same API is tests/adaptation/'s."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import keras
import numpy as np
import pytest

import grad_reverse
from grad_reverse.demo.data import make_domains
from helpers.backends import BACKEND, needs_jax_or_torch

pytestmark = needs_jax_or_torch

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_ten_lines() -> str:
    """The README's "DANN in ten lines" code block, as written."""
    text = README.read_text()
    section = text[text.index("### DANN in ten lines") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readmes_ten_lines_run_with_keras_imported_as_itself(capsys):
    code = readme_ten_lines()
    assert "import keras\n" in code and "tensorflow" not in code, code
    # The plain network trained the same way: the same block with the domain term weighted 0.
    plain = code.replace('metrics=["accuracy"])', 'metrics=["accuracy"], domain_loss_weight=0.0)')
    assert plain != code, "the README's compile call changed: say where the domain term's weight goes"
    accuracies = []
    for block in (code, plain):
        exec(compile(block, "README.md", "exec"), {})
        printed = capsys.readouterr().out
        accuracies.append(float(re.search(r"'accuracy': ([0-9.]+)", printed).group(1)))
    dann, plain_accuracy = accuracies
    # The README says "about 1.0" for its seed 0: 0.993 on JAX, 0.997 on PyTorch, 1.0 on TensorFlow
    # on one AVX-512 CPU (docs/results/backends.md, with seeds 0-9 from 0.73 to 1.0); the plain
    # network gives 0.86 on JAX, and so does a fit whose lambda never reaches the adversary, which
    # passed the bar of 0.8 that stood here alone. 0.05 above the plain network leaves room for
    # another CPU's rounding (measured gap 0.13).
    assert dann >= 0.8 and dann >= plain_accuracy + 0.05, (dann, plain_accuracy)


def dense(inputs: int, units: int, activation: str = "sigmoid") -> keras.Sequential:
    return keras.Sequential([keras.Input((inputs,)), keras.layers.Dense(units, activation=activation)])


MAKERS = {
    "dann": lambda: grad_reverse.DANN(dense(2, 8), dense(8, 1), dense(8, 1), lambda_max=2.0),
    "cdan": lambda: grad_reverse.CDAN(dense(2, 8), dense(8, 2, "softmax"), dense(16, 1), randomized=False),
    "cdan-e-randomized": lambda: grad_reverse.CDAN(
        dense(2, 8), dense(8, 2, "softmax"), dense(32, 1), entropy_conditioning=True, randomized=True, randomized_dim=32
    ),
    "mdd": lambda: grad_reverse.MDD(dense(2, 8), dense(8, 2, "softmax")),
}
LOGGED = {
    "dann": {"loss", "accuracy", "domain_loss", "domain_accuracy", "lambda"},
    "cdan": {"loss", "accuracy", "domain_loss", "domain_accuracy", "lambda"},
    "cdan-e-randomized": {"loss", "accuracy", "domain_loss", "domain_accuracy", "lambda"},
    "mdd": {"loss", "accuracy", "transfer_loss", "lambda"},
}


def compiled(method: str, optimizer=None, **compile_kwargs):
    """`(model, moons)`: the method's model, seeded, compiled with `optimizer` (Adam 0.01 by default)."""
    keras.utils.set_random_seed(0)
    moons = make_domains(seed=0, n_per_class=40)
    model = MAKERS[method]()
    loss = "binary_crossentropy" if method == "dann" else "sparse_categorical_crossentropy"
    model.compile(optimizer or keras.optimizers.Adam(0.01), loss, **compile_kwargs)
    return model, moons


def fit_moons(model, moons, **kwargs):
    """A fit on the moons of `steps_per_epoch=5` batches of 16, seeded; `kwargs`: the epochs."""
    return model.fit(
        moons.x_source,
        moons.y_source,
        target=moons.x_target,
        batch_size=16,
        steps_per_epoch=5,
        seed=0,
        verbose=0,
        **kwargs,
    )


def trained(method: str, **compile_kwargs):
    model, moons = compiled(method, metrics=["accuracy"], **compile_kwargs)
    return model, fit_moons(model, moons, epochs=2), moons


@pytest.mark.parametrize("method", sorted(MAKERS))
def test_each_method_fits_evaluates_and_predicts_with_its_metrics(method):
    model, history, moons = trained(method)
    assert set(history.history) == LOGGED[method]
    assert history.history["lambda"][-1] > history.history["lambda"][0] >= 0.0
    assert all(np.isfinite(v).all() for v in history.history.values())
    logs = model.evaluate(moons.x_target, moons.y_target, return_dict=True, verbose=0)
    assert set(logs) == {"loss", "accuracy"}
    predictions = model.predict(moons.x_target, verbose=0)
    assert predictions.shape == (len(moons.x_target), 1 if method == "dann" else 2)


@pytest.mark.parametrize("method", sorted(MAKERS))
def test_a_keras_file_round_trip_predicts_the_same_and_trains_on(method, tmp_path):
    model, _, moons = trained(method)
    path = tmp_path / f"{method}.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert type(loaded) is type(model)
    np.testing.assert_array_equal(loaded.predict(moons.x_target, verbose=0), model.predict(moons.x_target, verbose=0))
    # A loaded optimizer has taken steps: a new fit warns that its ramp starts anew (as on TensorFlow).
    with pytest.warns(UserWarning, match="starts its lambda ramp and its batches at step 0"):
        # pytest.warns records every warning and re-emits the others where pyproject's filter of
        # Keras' NumPy 2 deprecation no longer matches them: left out here, as it is everywhere else.
        warnings.filterwarnings("ignore", "__array__ implementation", DeprecationWarning)
        history = loaded.fit(
            moons.x_source, moons.y_source, target=moons.x_target, batch_size=16, steps_per_epoch=2, verbose=0
        )
    assert np.isfinite(history.history["loss"]).all()


def test_part_optimizers_move_the_feature_extractor_at_their_rate():
    """A feature extractor at learning rate 0 (scale 0.0) stays where it was; the heads move."""
    model, _, _ = trained("dann", part_optimizers={"feature_extractor": 0.0})
    keras.utils.set_random_seed(0)
    before = MAKERS["dann"]()
    for after_part, before_part in ((model.feature_extractor, before.feature_extractor),):
        for a, b in zip(after_part.get_weights(), before_part.get_weights()):
            np.testing.assert_array_equal(a, b)
    assert any(
        not np.array_equal(a, b) for a, b in zip(model.label_head.get_weights(), before.label_head.get_weights())
    )


def test_use_ema_and_the_learning_rate_schedule_train():
    schedule = grad_reverse.DANNLearningRateSchedule(0.01, decay_steps=10)
    keras.utils.set_random_seed(0)
    moons = make_domains(seed=0, n_per_class=40)
    model = MAKERS["dann"]()
    model.compile(keras.optimizers.Adam(schedule, use_ema=True), "binary_crossentropy")
    model.fit(
        moons.x_source, moons.y_source, target=moons.x_target, batch_size=16, epochs=2, steps_per_epoch=5, verbose=0
    )
    assert int(model.optimizer.iterations.numpy()) == 10


@pytest.mark.parametrize("method", ["dann", "mdd"])
def test_a_second_fit_with_use_ema_runs_and_continues_the_plan(method):
    """Keras' JAX fit ends with each variable sharing its moving average's buffer, and a second
    fit then fails ("Attempt to donate the same buffer twice"); the models give each variable its
    own again. Two fits in a row (the second from `initial_epoch=1`) end with finite weights, the
    second's ramp where one fit of the same total steps has it. The weights themselves differ from that
    one fit's, by design: the first fit ends by putting the averages in place, one fit does not."""

    histories = []
    for fits in (({"epochs": 1}, {"epochs": 2, "initial_epoch": 1}), ({"epochs": 2},)):
        model, moons = compiled(method, keras.optimizers.Adam(0.01, use_ema=True))
        histories.append([fit_moons(model, moons, **kwargs).history for kwargs in fits])
        assert int(model.optimizer.iterations.numpy()) == 10
        assert all(np.isfinite(w).all() for w in model.get_weights())
    (_, second), (whole,) = histories
    # The first fit ramps over its own 5 steps; the second, from initial_epoch=1 of 2, over 10 from step 5.
    assert second["lambda"] == whole["lambda"][1:]


def test_the_same_seed_draws_the_same_batches_and_ends_with_the_same_weights():
    first, _, _ = trained("cdan")
    second, _, _ = trained("cdan")
    for a, b in zip(first.get_weights(), second.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_what_is_tensorflows_says_so_and_what_to_use_instead():
    with pytest.raises(ImportError, match=rf"paired_dataset needs Keras on TensorFlow.*runs on {BACKEND}.*fit takes"):
        grad_reverse.adaptation.paired_dataset(None, None)
    with pytest.raises(ImportError, match=rf"grad_reverse.serving needs Keras on TensorFlow.*runs on {BACKEND}"):
        grad_reverse.serving  # noqa: B018 (the attribute access is the test)
    # The module itself imports (the command line reads its argparse part without TensorFlow);
    # each name that needs TensorFlow raises, as docs/keras-backends.md says.
    import grad_reverse.serving as serving

    for name in ("export_serving", "make_servable", "check_serving"):
        with pytest.raises(ImportError, match=rf"grad_reverse.serving.{name} needs Keras on TensorFlow"):
            getattr(serving, name)
    model, _, moons = trained("dann")

    class Points:  # what a tf.data dataset looks like to the check (an element_spec)
        element_spec = None

    for args, kwargs in (((Points(), moons.y_source), {"target": moons.x_target}), ((Points(),), {})):
        with pytest.raises(ValueError, match=rf"DANN.fit on Keras' {BACKEND} backend got a tf.data dataset as x"):
            model.fit(*args, **kwargs)


@pytest.mark.parametrize("method", ["cdan", "mdd"])
def test_a_label_head_of_several_sigmoid_units_is_refused_before_any_step(method):
    """As on TensorFlow (a step's error on JAX would leave Keras' variables emptied)."""
    keras.utils.set_random_seed(0)
    moons = make_domains(seed=0, n_per_class=20)
    if method == "cdan":
        model = grad_reverse.CDAN(dense(2, 8), dense(8, 2, "sigmoid"), dense(16, 1), randomized=False)
    else:
        model = grad_reverse.MDD(dense(2, 8), dense(8, 2, "sigmoid"))
    model.compile(keras.optimizers.SGD(0.1), "binary_crossentropy")
    before = model.feature_extractor.get_weights()
    with pytest.raises(ValueError, match="2 sigmoid units gives independent labels, not class probabilities"):
        model.fit(moons.x_source, moons.y_source, target=moons.x_target, batch_size=8, verbose=0)
    for a, b in zip(before, model.feature_extractor.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_fit_takes_a_pydataset_of_ready_batches():
    """A user's own batches: a keras.utils.PyDataset of ((x_source, x_target), y_source)."""
    moons = make_domains(seed=0, n_per_class=40)

    class Batches(keras.utils.PyDataset):
        def __len__(self):
            return 4

        def __getitem__(self, index):
            rows = slice(8 * index, 8 * index + 8)
            return (moons.x_source[rows], moons.x_target[rows]), moons.y_source[rows]

    keras.utils.set_random_seed(0)
    model = MAKERS["dann"]()
    model.compile(keras.optimizers.Adam(0.01), "binary_crossentropy")
    history = model.fit(Batches(), epochs=2, verbose=0)
    assert len(history.history["lambda"]) == 2 and history.history["lambda"][-1] > 0.9
    assert int(model.optimizer.iterations.numpy()) == 8
    with pytest.raises(ValueError, match="batch_size applies to arrays"):
        model.fit(Batches(), batch_size=8, verbose=0)
