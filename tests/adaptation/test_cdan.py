"""`grad_reverse.CDAN`: the logged domain term equals a hand computation (numpy,
from the model's weights) on a batch of 2 source + 6 target points, for the
multilinear and the randomized map, with and without entropy conditioning,
for softmax and binary (one sigmoid unit) label heads, by default at the
authors' scale; plain CDAN's conditioning carries no gradient into the label
head (the gradients in full: test_gradients.py), unless `map_gradient=True`, when
it carries the reversed one (against plain TensorFlow autodiff); the domain head is built on the
map's size; bad input gets errors naming what is accepted."""

import numpy as np
import pytest

from grad_reverse._keras import keras
from grad_reverse.adaptation import CDAN
from helpers.models import points

FEATURES = 3


def parts(classes: int, seed: int = 0, domain_inputs=None) -> tuple:
    """A tanh feature extractor (3 features), a softmax (or, for classes=1, sigmoid)
    label head, and a sigmoid domain head (unbuilt unless `domain_inputs`)."""
    keras.utils.set_random_seed(seed)
    feature_extractor = keras.Sequential([keras.Input((2,)), keras.layers.Dense(FEATURES, activation="tanh")])
    label_head = keras.Sequential(
        [
            keras.Input((FEATURES,)),
            keras.layers.Dense(
                classes,
                activation="sigmoid" if classes == 1 else "softmax",
                kernel_initializer=keras.initializers.RandomNormal(stddev=3.0, seed=seed + 1),
            ),
        ]
    )
    layers = [
        keras.layers.Dense(
            1, activation="sigmoid", kernel_initializer=keras.initializers.RandomNormal(stddev=1.0, seed=seed)
        )
    ]
    domain_head = keras.Sequential(([keras.Input((domain_inputs,))] if domain_inputs else []) + layers)
    return feature_extractor, label_head, domain_head


def one_step(model: CDAN, label_loss: str, **compile_kwargs) -> dict:
    """One step at learning rate 0 on the first 2 source and 6 target points: the History."""
    x_source, y_source, x_target = points()
    model.compile(keras.optimizers.SGD(0.0), label_loss, **compile_kwargs)
    if label_loss == "sparse_categorical_crossentropy":
        y_source = y_source.astype("int32")
    return model.fit(
        x_source,
        y_source,
        target=x_target,
        batch_size=8,
        source_fraction=0.25,
        steps_per_epoch=1,
        shuffle=False,
        verbose=0,
    ).history


def hand_domain_term(model: CDAN, entropy: bool, reduction: str, r=None) -> float:
    """The CDAN(+E) domain term, from the model's weights, in float64."""
    x_source, _, x_target = points()
    x = np.concatenate([x_source[:2], x_target[:6]]).astype("float64")
    w, b = (v.astype("float64") for v in model.feature_extractor.get_weights())
    f = np.tanh(x @ w + b)
    wl, bl = (v.astype("float64") for v in model.label_head.get_weights())
    z = f @ wl + bl
    if z.shape[1] == 1:
        p = 1 / (1 + np.exp(-z))
        g = np.concatenate([1 - p, p], axis=1)
    else:
        g = np.exp(z - z.max(1, keepdims=True))
        g /= g.sum(1, keepdims=True)
    if r is None:
        mapped = np.einsum("nc,nj->ncj", g, f).reshape(len(x), -1)  # class-major
    else:
        r_f, r_g = r
        mapped = (f @ r_f) * (g @ r_g) / np.sqrt(r_f.shape[1])
    wd, bd = (v.astype("float64") for v in model.domain_head.get_weights())
    d = (1 / (1 + np.exp(-(mapped @ wd + bd)))).reshape(-1)
    domain = np.array([0.0] * 2 + [1.0] * 6)
    losses = -(domain * np.log(d) + (1 - domain) * np.log(1 - d))
    weights = 1 + np.exp(np.sum(g * np.log(g + 1e-5), axis=1)) if entropy else np.ones(len(x))
    if reduction == "mean_over_batch":
        return float(np.sum(weights * losses) / np.sum(weights))
    s, t = slice(0, 2), slice(2, 8)
    source = np.sum(weights[s] * losses[s]) / np.sum(weights[s])
    both = source + np.sum(weights[t] * losses[t]) / np.sum(weights[t])
    return float(0.5 * both if reduction == "mean_over_domains" else both)


@pytest.mark.parametrize("entropy", [False, True])
@pytest.mark.parametrize("reduction", ["sum_over_domains", "mean_over_domains", "mean_over_batch"])
def test_the_multilinear_domain_term_equals_a_hand_computation(entropy, reduction):
    model = CDAN(*parts(classes=3), entropy_conditioning=entropy)
    history = one_step(model, "sparse_categorical_crossentropy", domain_loss_reduction=reduction)
    assert model.domain_head.get_weights()[0].shape == (3 * FEATURES, 1)  # built on the map: 3 classes x 3 features
    assert history["domain_loss"][0] == pytest.approx(hand_domain_term(model, entropy, reduction), rel=1e-5)


def test_the_entropy_weights_change_the_term_on_this_batch():
    """So the hand computations above can tell CDAN+E from CDAN, and the normalizations apart."""
    model = CDAN(*parts(classes=3), entropy_conditioning=True)
    one_step(model, "sparse_categorical_crossentropy")
    plain = hand_domain_term(model, False, "sum_over_domains")
    weighted = hand_domain_term(model, True, "sum_over_domains")
    batch = hand_domain_term(model, True, "mean_over_batch")
    assert abs(weighted - plain) > 1e-4 and abs(weighted - 2 * batch) > 1e-3, (plain, weighted, batch)


def test_a_binary_sigmoid_head_works_as_two_classes():
    model = CDAN(*parts(classes=1), entropy_conditioning=True)
    history = one_step(model, "binary_crossentropy")
    assert model.domain_head.get_weights()[0].shape == (2 * FEATURES, 1)
    assert history["domain_loss"][0] == pytest.approx(hand_domain_term(model, True, "mean_over_domains"), rel=1e-5)


@pytest.mark.parametrize("entropy", [False, True])
def test_the_default_term_is_the_authors_half_the_sum_of_the_domains_means(entropy):
    """thuml/CDAN: plain CDAN's binary cross-entropy is a mean over the half/half batch; CDAN+E's
    weighted sum is divided by the weights' total, which its per-domain normalization makes 2."""
    model = CDAN(*parts(classes=3), entropy_conditioning=entropy)
    history = one_step(model, "sparse_categorical_crossentropy")
    summed = hand_domain_term(model, entropy, "sum_over_domains")
    assert history["domain_loss"][0] == pytest.approx(0.5 * summed, rel=1e-5)


def test_the_randomized_map_equals_a_hand_computation_with_matrices_from_the_seed():
    model = CDAN(*parts(classes=3), randomized=True, randomized_dim=16, map_seed=7)
    history = one_step(model, "sparse_categorical_crossentropy")
    assert model.domain_head.get_weights()[0].shape == (16, 1)
    rng = np.random.default_rng(7)
    r = rng.standard_normal((FEATURES, 16)).astype("float32"), rng.standard_normal((3, 16)).astype("float32")
    expected = hand_domain_term(model, False, "mean_over_domains", r=tuple(m.astype("float64") for m in r))
    assert history["domain_loss"][0] == pytest.approx(expected, rel=1e-5)


def test_the_map_switches_to_randomized_above_4096_values():
    model = CDAN(*parts(classes=3))
    assert model.map_size(64, 64) == 4096 and model.map_size(65, 64) == 1024
    assert CDAN(*parts(classes=3), randomized=False).map_size(65, 64) == 65 * 64


def test_the_class_probabilities_carry_no_gradient_into_the_label_head():
    """With map_gradient=False (the authors' code), one SGD step of plain CDAN moves the label head as
    the label loss alone does (domain_loss_weight 0): the domain term reaches the label head only through
    the conditioning, which then has no gradient (CDAN+E's entropy weights carry one:
    tests/adaptation/test_gradients.py)."""
    moved = []
    for weight in (1.0, 0.0):
        model = CDAN(
            *parts(classes=3, domain_inputs=3 * FEATURES),
            entropy_conditioning=False,
            lambda_schedule="constant",
            map_gradient=False,
        )
        x_source, y_source, x_target = points()
        model.compile(keras.optimizers.SGD(0.5), "sparse_categorical_crossentropy", domain_loss_weight=weight)
        model.fit(
            x_source,
            y_source.astype("int32"),
            target=x_target,
            batch_size=8,
            steps_per_epoch=1,
            shuffle=False,
            verbose=0,
        )
        moved.append((model.label_head.get_weights()[0], model.domain_head.get_weights()[0]))
    np.testing.assert_allclose(moved[0][0], moved[1][0], rtol=1e-6, atol=1e-7)
    assert np.abs(moved[0][1] - moved[1][1]).max() > 1e-4  # the domain term trained the domain head


@pytest.mark.parametrize("map_gradient", [True, False, "default"])
def test_map_gradient_sends_the_reversed_domain_gradient_through_the_probabilities(map_gradient):
    """The label head's gradient of the objective: with `map_gradient=True` (the default), the label
    loss's minus lambda times the domain term's through `g` in the map (computed here with plain
    TensorFlow ops on the same weights, no GradReverse); with False (the authors'), the label loss's alone."""
    import tensorflow as tf

    lambda_ = 0.7
    switch = {} if map_gradient == "default" else {"map_gradient": map_gradient}
    model = CDAN(
        *parts(classes=3, domain_inputs=3 * FEATURES), lambda_schedule="constant", lambda_max=lambda_, **switch
    )
    model.compile("sgd", "sparse_categorical_crossentropy")
    x_source, y_source, x_target = points(n=6)
    y_source = y_source.astype("int32")
    label_weights = model.label_head.trainable_variables
    with tf.GradientTape() as tape:
        # Tensors, not arrays: tf-keras' compiled loss reads `.shape.rank` of its labels.
        inputs = (tf.constant(v) for v in (x_source, x_target, y_source))
        total = model.objective(*inputs, lambda_=tf.constant(lambda_))[0]
    got = tape.gradient(total, label_weights)

    with tf.GradientTape(persistent=True) as tape:
        features = model.feature_extractor(np.concatenate([x_source, x_target]))
        g = model.label_head(features)
        picked = tf.gather(g[:6], y_source[:, 0], axis=1, batch_dims=1)
        label_loss = -tf.reduce_mean(tf.math.log(picked))
        mapped = tf.reshape(g[:, :, None] * features[:, None, :], [12, 3 * FEATURES])
        p_target = tf.reshape(model.domain_head(mapped), [-1])
        term = 0.5 * (-tf.reduce_mean(tf.math.log(1.0 - p_target[:6])) - tf.reduce_mean(tf.math.log(p_target[6:])))
    expected = tape.gradient(label_loss, label_weights)
    if map_gradient:  # True, and the default
        expected = [e - lambda_ * d for e, d in zip(expected, tape.gradient(term, label_weights))]
    for got_part, expected_part in zip(got, expected):
        np.testing.assert_allclose(got_part, expected_part, rtol=1e-4, atol=1e-6)
    assert max(float(tf.reduce_max(tf.abs(d))) for d in tape.gradient(term, label_weights)) > 1e-3


def test_map_gradient_must_be_a_bool():
    with pytest.raises(ValueError, match="map_gradient must be True or False, got 'yes'"):
        CDAN(*parts(classes=3), map_gradient="yes")


# --- bad input ----------------------------------------------------------------------------


def test_a_built_domain_head_of_the_wrong_size_is_refused_naming_the_maps_size():
    model = CDAN(*parts(classes=3, domain_inputs=FEATURES))
    model.compile("sgd", "sparse_categorical_crossentropy")
    x_source, y_source, x_target = points()
    with pytest.raises(ValueError, match=r"domain head takes inputs of size 3, but the multilinear map gives 9"):
        model.fit(x_source, y_source.astype("int32"), target=x_target, batch_size=8, verbose=0)


def test_a_label_head_without_class_probabilities_is_refused_at_compile():
    feature_extractor, _, domain_head = parts(classes=3)
    label_head = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(3, activation="relu")])
    with pytest.raises(ValueError, match=r"class probabilities.*'relu'.*softmax, sigmoid \(one unit\) or linear"):
        CDAN(feature_extractor, label_head, domain_head).compile("sgd", "mse")


def test_several_sigmoid_units_are_refused_at_the_first_step():
    feature_extractor, _, domain_head = parts(classes=3)
    label_head = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(3, activation="sigmoid")])
    model = CDAN(feature_extractor, label_head, domain_head)
    model.compile("sgd", "binary_crossentropy")
    x_source, _, x_target = points()
    with pytest.raises(ValueError, match=r"3 sigmoid units gives independent labels"):
        model.fit(x_source, np.zeros((16, 3), "float32"), target=x_target, batch_size=8, verbose=0)


def test_a_multilinear_map_too_large_names_its_size_and_the_randomized_map():
    model = CDAN(*parts(classes=3), randomized=False)
    with pytest.raises(ValueError, match=r"2048 features and 1024 classes has 2097152 values.*randomized=True"):
        model.map_size(2048, 1024)


def test_source_and_target_of_different_shapes_are_refused():
    model = CDAN(*parts(classes=3))
    model.compile("sgd", "sparse_categorical_crossentropy")
    x_source, y_source, _ = points()
    with pytest.raises(ValueError, match=r"source and target points must have the same shape"):
        model.fit(x_source, y_source.astype("int32"), target=np.zeros((16, 3), "float32"), verbose=0)


def test_one_cdan_step_reads_its_method_file_the_shared_base_and_tensorflows_step():
    # The layout's promise (docs/methods.md): the method file, the shared model base, the domain
    # head's module and the networks' (class probabilities), and the backend's step (TensorFlow's
    # tape); lambda's value and the op come from grad_reverse.schedule, .backend_ops and .ops.
    import os
    import sys

    import tensorflow as tf

    import grad_reverse

    model = CDAN(*parts(3), entropy_conditioning=True)
    model.compile(keras.optimizers.SGD(0.1), "sparse_categorical_crossentropy", run_eagerly=True)
    x_source, _, x_target = points()
    y_source = np.arange(len(x_source)) % 3
    model.fit(x_source, y_source, target=x_target, batch_size=8, steps_per_epoch=1, verbose=0)
    package = os.path.dirname(grad_reverse.__file__)
    called = set()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(package):
            called.add(os.path.relpath(frame.f_code.co_filename, package).replace(os.sep, "/"))

    batch = tf.nest.map_structure(tf.convert_to_tensor, ((x_source[:4], x_target[:4]), y_source[:4]))
    sys.setprofile(profile)
    try:
        model.train_step(batch)
    finally:
        sys.setprofile(None)
    assert {f for f in called if f.startswith("adaptation/")} == {
        "adaptation/cdan.py",
        "adaptation/domain_head.py",
        "adaptation/model.py",
        "adaptation/networks.py",
        "adaptation/objective.py",  # the objective's sum and the step, AdversarialModel's base
        "adaptation/training/steps.py",  # which backend's step
        "adaptation/training/tensorflow.py",  # the tape: TensorFlow's gradients
    }, sorted(called)
    assert "schedule.py" in called and "ops.py" in called and "backend_ops.py" in called, sorted(called)
