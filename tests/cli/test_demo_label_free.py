"""The demo's "Without target labels" block (`grad_reverse.demo.label_free`):
the default rule's pick per seed, beside every model's real target accuracy."""

import numpy as np

from grad_reverse.demo import label_free
from helpers.models import domains, parts


def test_the_block_shows_each_seeds_pick_beside_every_models_target_accuracy():
    accuracy = {"plain": [0.70, 0.75], "dann": [0.95, 0.60]}
    text = label_free.summary(["dann", "plain"], accuracy, [3, 4])
    assert "default (source_accuracy)" in text
    assert "seed 3: picks dann         (0.950)   [plain 0.700  dann 0.950]" in text
    assert "seed 4: picks plain        (0.750)   [plain 0.750  dann 0.600]" in text
    # the picks' mean (0.95 + 0.75) / 2, and each method's own mean
    assert "Mean target accuracy of the picks: 0.850 (every seed's same method: plain 0.725, dann 0.775)" in text
    assert "gated ensemble" not in text  # none given


def test_the_block_shows_the_gated_ensembles_accuracy_per_seed_and_its_mean():
    text = label_free.summary(["dann", "plain"], {"plain": [0.7, 0.75], "dann": [0.95, 0.6]}, [3, 4], [0.9, 0.8])
    assert "seed 3 0.900  seed 4 0.800; mean 0.850." in text


def test_the_pick_is_select_without_labels_default_choice():
    from grad_reverse._keras import keras
    from grad_reverse.adaptation import DANN, select_without_labels

    x, y, x_target = domains(0, n_source=120)
    models = {}
    for name, weight in (("plain", 0.0), ("dann", 1.0)):
        model = DANN(*parts(0))
        model.compile(keras.optimizers.Adam(0.05), "binary_crossentropy", domain_loss_weight=weight)
        model.fit(x[:90], y[:90], target=x_target, batch_size=32, steps_per_epoch=5, seed=0, verbose=0)
        models[name] = model
    pick = label_free.choose(models, x[90:], y[90:], x_target, seed=0)
    expected = select_without_labels(models, x[90:], y[90:], x_target)
    assert pick == expected.name and pick in models
    chosen = label_free.selection(models, x[90:], y[90:], x_target, seed=0)
    assert chosen.ensemble_members == expected.ensemble_members
    assert np.asarray(x_target).shape[0] <= label_free.POINTS
