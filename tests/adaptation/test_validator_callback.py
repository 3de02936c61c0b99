"""`ValidatorCallback` with an optimizer that averages the weights (EMA): the
score and the checkpoint are of the weights the fit ends with, and training
is unchanged; and its input refused at construction or at the fit's start,
every point and label checked, before any training step."""

import numpy as np
import pytest

from grad_reverse._keras import KERAS_3, keras
from grad_reverse.adaptation import DANN, Validator, ValidatorCallback
from helpers.models import domains, parts


@pytest.fixture(scope="module")
def data():
    x_source, y_source, x_target = domains(0, n_source=120, n_target=120)
    return x_source[:90], y_source[:90], x_source[90:], y_source[90:], x_target


class _Scripted(Validator):
    """Scores the values it is given, one per call (e.g. rising: the last epoch
    the best), and keeps the target probabilities of the weights it scored."""

    def __init__(self, name, values):
        self.name, self.values, self.seen = name, list(values), []

    def score(self, outputs):
        self.seen.append(outputs.target_probabilities[:, 1].copy())
        return float(self.values[len(self.seen) - 1])


class _RawAtEpochEnd(keras.callbacks.Callback):
    """Listed before ValidatorCallback: the model's target predictions at each epoch's end, before any swap."""

    def __init__(self, x):
        super().__init__()
        self.x, self.seen = x, []

    def on_epoch_end(self, epoch, logs=None):
        self.seen.append(np.asarray(self.model.predict(self.x, verbose=0))[:, 0])


def _fit(x, y, x_target, callbacks, epochs=3):
    model = DANN(*parts(0), lambda_max=1.0)
    model.compile(keras.optimizers.Adam(0.05, use_ema=True, ema_momentum=0.9), "binary_crossentropy")
    model.fit(
        x, y, target=x_target, batch_size=32, steps_per_epoch=5, epochs=epochs, seed=0, verbose=0, callbacks=callbacks
    )
    return model


def _load(path, x):
    if KERAS_3:
        return keras.models.load_model(path)
    kept = DANN(*parts(0), lambda_max=1.0)
    kept.compile(keras.optimizers.Adam(0.05, use_ema=True), "binary_crossentropy")
    kept(x[:1])
    kept.load_weights(path)
    return kept


def test_with_ema_the_checkpoint_of_the_best_last_epoch_predicts_as_the_fitted_model(data, tmp_path):
    x, y, x_val, y_val, x_target = data
    path = str(tmp_path / ("best.keras" if KERAS_3 else "best.h5"))
    rising, raw = _Scripted("rising", [1.0, 2.0, 3.0]), _RawAtEpochEnd(x_target)
    checkpoint = keras.callbacks.ModelCheckpoint(
        path, monitor="val_rising", mode="max", save_best_only=True, save_weights_only=not KERAS_3
    )
    model = _fit(x, y, x_target, [raw, ValidatorCallback([rising], x_val, y_val, x_target), checkpoint])
    final = np.asarray(model.predict(x_target, verbose=0))[:, 0]
    # The raw weights of the last epoch are not the average: the test can tell them apart.
    assert np.max(np.abs(raw.seen[-1] - final)) > 1e-3
    # The checkpoint Keras kept for the best (last) epoch is the fitted model.
    np.testing.assert_allclose(np.asarray(_load(path, x).predict(x_target, verbose=0))[:, 0], final, atol=1e-6)
    # And the score read those weights.
    np.testing.assert_allclose(rising.seen[-1], final, atol=1e-6)
    # Training itself is unchanged: each epoch goes on from the raw weights.
    alone = _fit(x, y, x_target, [])
    np.testing.assert_allclose(np.asarray(alone.predict(x_target, verbose=0))[:, 0], final, atol=1e-6)


def test_with_ema_a_fit_stopped_early_ends_with_the_weights_last_scored(data):
    x, y, x_val, y_val, x_target = data
    falling = _Scripted("falling", [3.0, 2.0, 1.0, 0.0])
    stop = keras.callbacks.EarlyStopping(monitor="val_falling", mode="max", patience=0)
    model = _fit(x, y, x_target, [ValidatorCallback([falling], x_val, y_val, x_target), stop], epochs=4)
    assert len(falling.seen) == 2
    np.testing.assert_allclose(np.asarray(model.predict(x_target, verbose=0))[:, 0], falling.seen[-1], atol=1e-6)


# --- bad input, before any step -------------------------------------------------------


def test_the_callback_checks_every_point_and_label_at_construction(data):
    x, y, x_val, y_val, x_target = data
    with pytest.raises(ValueError, match="x_source and y_source must hold the same points, got 30 and 29"):
        ValidatorCallback(["snd"], x_val, y_val[:29], x_target)
    far = x_target.copy()
    far[100, 1] = np.nan
    with pytest.raises(ValueError, match=r"x_target holds NaN or infinity \(first at point 100\)"):
        ValidatorCallback(["snd"], x_val, y_val, far)
    half = y_val.copy()
    half[17] = 0.5
    with pytest.raises(ValueError, match=r"class numbers 0, 1, \.\.\. \(got 0\.5 at point 17\).*accepted labels"):
        ValidatorCallback(["snd"], x_val, half, x_target)
    with pytest.raises(ValueError, match=r"not one-hot.*were the points passed as labels\?.*accepted labels: class"):
        ValidatorCallback(["snd"], x_val, x_val, x_target)  # the points given as labels
    with pytest.raises(ValueError, match=r"points of the same shape, got \(2,\) and \(3,\)"):
        ValidatorCallback(["snd"], x_val, y_val, np.zeros((5, 3)))


def test_the_callback_refuses_a_dataset_naming_what_is_accepted(data):
    tf = pytest.importorskip("tensorflow")
    x, y, x_val, y_val, x_target = data
    with pytest.raises(ValueError, match=r"x_target must be an array of points.*got a .*Dataset.*np.concatenate"):
        ValidatorCallback(["snd"], x_val, y_val, tf.data.Dataset.from_tensor_slices(x_target).batch(8))


def test_a_label_out_of_the_heads_range_stops_the_fit_before_its_first_step(data):
    x, y, x_val, y_val, x_target = data
    two = y_val.copy()
    two[25] = 2.0  # a class number, but the sigmoid head has classes 0 and 1
    scorer = ValidatorCallback(["snd"], x_val, two, x_target)
    model = DANN(*parts(0), lambda_max=1.0)
    model.compile(keras.optimizers.Adam(0.05), "binary_crossentropy")
    with pytest.raises(ValueError, match=r"class numbers 0 \.\. 1 for a head of 2 classes"):
        model.fit(x, y, target=x_target, batch_size=32, steps_per_epoch=2, verbose=0, callbacks=[scorer])
    assert int(model.optimizer.iterations) == 0
