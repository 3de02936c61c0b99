"""A custom training loop with parts written without `keras.Input` (as most
users write them): calling the model, then `build_optimizers()`, builds every
part and every optimizer's state, so `train_step` trains the adversary too;
`build_optimizers()` on a model never called says which parts are not built
and how to build them."""

from __future__ import annotations

import numpy as np
import pytest

from grad_reverse._keras import keras
from grad_reverse.adaptation import CDAN, DANN, MDD, paired_dataset
from helpers.models import domains


def dense(*units_and_activations):
    return keras.Sequential([keras.layers.Dense(u, activation=a) for u, a in units_and_activations])


def unbuilt(method: str):
    keras.utils.set_random_seed(0)
    features = dense((8, "tanh"))
    if method == "dann":
        return DANN(features, dense((1, "sigmoid")), dense((4, "relu"), (1, "sigmoid")))
    label_head = dense((2, "softmax"))
    if method == "cdan":
        return CDAN(features, label_head, dense((4, "relu"), (1, "sigmoid")))
    return MDD(features, label_head, dense((2, "softmax")))


@pytest.mark.parametrize("method", ["dann", "cdan", "mdd"])
def test_build_optimizers_builds_the_adversary_the_call_did_not_and_train_step_trains_it(method):
    x_source, y_source, x_target = domains()
    model = unbuilt(method)
    loss = "binary_crossentropy" if method == "dann" else "sparse_categorical_crossentropy"
    model.compile(keras.optimizers.SGD(0.1), loss, part_optimizers={"feature_extractor": 0.5})
    model(x_source[:1])
    adversary = model.PARTS[-1]
    model.build_optimizers()
    assert getattr(model, adversary).built
    before = [w.copy() for w in getattr(model, adversary).get_weights()]
    assert before
    model.set_schedule_steps(10)
    batch = next(iter(paired_dataset((x_source, y_source), x_target, 32, seed=0)))
    for _ in range(3):
        model.train_step(batch)
    after = getattr(model, adversary).get_weights()
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(after, before)) > 0.0


def test_build_optimizers_on_a_model_never_called_names_the_parts_and_how_to_build_them():
    model = unbuilt("dann")
    model.compile("sgd", "binary_crossentropy")
    with pytest.raises(
        RuntimeError, match=r"DANN.build_optimizers: feature_extractor, label_head, domain_head not built"
    ):
        model.build_optimizers()
    with pytest.raises(RuntimeError, match=r"call it on a batch of points, model\(x\[:1\]\)"):
        model.build_optimizers()
