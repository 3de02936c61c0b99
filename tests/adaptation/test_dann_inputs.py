"""`grad_reverse.DANN` refuses bad input before training starts, with a
message naming what was expected: target data with labels, source data
without, mismatched point shapes, a domain head with the wrong output
shape, fit without target data, and bad constructor/compile arguments."""

import numpy as np
import pytest

from grad_reverse._keras import keras
from grad_reverse.adaptation import CDAN, DANN, MDD
from helpers.backends import BACKEND, needs_tensorflow
from helpers.models import dann, domains, parts


@pytest.fixture
def model():
    m = dann()
    m.compile(keras.optimizers.SGD(0.1), "binary_crossentropy")
    return m


def weights_of(model):
    return [w.copy() for w in model.get_weights()]


def assert_refused(model, match, *args, **kwargs):
    before = weights_of(model) if model.built else None
    with pytest.raises(ValueError, match=match):
        model.fit(*args, verbose=0, **kwargs)
    if before is not None:  # nothing trained
        for a, b in zip(before, model.get_weights()):
            np.testing.assert_array_equal(a, b)


def test_target_data_with_labels_is_refused(model):
    x_source, y_source, x_target = domains()
    y_target = np.zeros((len(x_target), 1), "float32")
    assert_refused(model, "target data must be unlabeled", x_source, y_source, target=(x_target, y_target))


@needs_tensorflow
def test_a_target_dataset_with_labels_is_refused(model):
    import tensorflow as tf

    x_source, y_source, x_target = domains()
    labeled = tf.data.Dataset.from_tensor_slices((x_target, np.zeros((len(x_target), 1), "float32")))
    assert_refused(model, "target data must be unlabeled.*single tensors", x_source, y_source, target=labeled)


def test_source_data_without_labels_is_refused(model):
    x_source, _, x_target = domains()
    assert_refused(model, "source data must be labeled", x_source, target=x_target)


@needs_tensorflow
def test_a_source_dataset_without_labels_is_refused(model):
    import tensorflow as tf

    x_source, _, x_target = domains()
    unlabeled = tf.data.Dataset.from_tensor_slices(x_source)
    assert_refused(
        model, "source data must be labeled: a dataset of \\(x, y\\)", unlabeled, target=x_target, steps_per_epoch=2
    )


def test_source_x_and_y_of_different_lengths_are_refused(model):
    x_source, y_source, x_target = domains()
    assert_refused(model, "same length, got 96 and 95", x_source, y_source[:-1], target=x_target)


@needs_tensorflow
def test_mismatched_point_shapes_are_refused(model):
    import tensorflow as tf

    x_source, y_source, x_target = domains()
    wide = np.concatenate([x_target, x_target], axis=1)
    assert_refused(model, r"same shape, got source \(2,\) and target \(4,\)", x_source, y_source, target=wide)
    batches = tf.data.Dataset.from_tensors(((x_source[:8], wide[:8]), y_source[:8])).repeat()
    assert_refused(model, "same shape", batches, steps_per_epoch=2)


@needs_tensorflow
def test_fit_without_target_data_is_refused(model):
    import tensorflow as tf

    x_source, y_source, _ = domains()
    assert_refused(model, "needs unlabeled target-domain data", x_source, y_source)
    source = tf.data.Dataset.from_tensor_slices((x_source, y_source))
    assert_refused(model, "must yield \\(\\(x_source, x_target\\), y_source\\) batches", source.batch(8))


def test_a_domain_head_with_the_wrong_output_shape_is_refused_before_any_step():
    feature_extractor, label_head, _ = parts()
    two_outputs = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2, activation="sigmoid")])
    model = DANN(feature_extractor, label_head, two_outputs)
    model.compile(keras.optimizers.SGD(0.1), "binary_crossentropy")
    x_source, y_source, x_target = domains()
    before = [w.copy() for w in feature_extractor.get_weights() + label_head.get_weights()]
    with pytest.raises(ValueError, match=r"domain head must output one value per point.*got shape \(.*2\)"):
        model.fit(x_source, y_source, target=x_target, verbose=0)
    for a, b in zip(before, feature_extractor.get_weights() + label_head.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_a_domain_head_whose_output_kind_cannot_be_told_needs_domain_from_logits():
    model = DANN(*parts()[:2], parts(domain_activation="softmax")[2])
    with pytest.raises(ValueError, match="domain_from_logits"):
        model.compile("sgd", "binary_crossentropy")
    model.compile("sgd", "binary_crossentropy", domain_from_logits=False)  # told: fine


@needs_tensorflow
def test_unknown_length_needs_steps_per_epoch(model):
    from grad_reverse.adaptation import paired_dataset

    x_source, y_source, x_target = domains()
    endless = paired_dataset((x_source, y_source), x_target, 16)
    assert_refused(model, "pass steps_per_epoch", endless)


def test_bad_arguments_are_refused(model):
    with pytest.raises(ValueError, match="lambda_schedule must be one of"):
        dann(lambda_schedule="linear")
    with pytest.raises(ValueError, match="lambda_max must be a finite number"):
        dann(lambda_max=float("inf"))
    with pytest.raises(TypeError, match="domain_head must be a Keras model or layer"):
        DANN(*parts()[:2], lambda x: x)
    x_source, y_source, x_target = domains()
    assert_refused(
        model, "batch_size must be an integer of at least 2", x_source, y_source, target=x_target, batch_size=1
    )
    assert_refused(model, "source_fraction", x_source, y_source, target=x_target, source_fraction=1.0)


@needs_tensorflow
def test_bad_arguments_of_paired_dataset_are_refused():
    from grad_reverse.adaptation import paired_dataset

    with pytest.raises(ValueError, match="batch_size must be an integer of at least 2"):
        paired_dataset(domains()[:2], domains()[2], 1)
    with pytest.raises(ValueError, match="source_fraction"):
        paired_dataset(domains()[:2], domains()[2], 8, source_fraction=1.0)


@needs_tensorflow
def test_paired_batches_hold_source_and_target_points_half_and_half():
    from grad_reverse.adaptation import paired_dataset

    x_source, y_source, x_target = domains(n_source=10, n_target=7)
    (xs, xt), ys = next(iter(paired_dataset((x_source, y_source), x_target, 8, shuffle=False)))
    np.testing.assert_array_equal(xs, x_source[:4])
    np.testing.assert_array_equal(ys, y_source[:4])
    np.testing.assert_array_equal(xt, x_target[:4])
    (xs, xt), _ = next(iter(paired_dataset((x_source, y_source), x_target, 8, source_fraction=0.75)))
    assert (len(xs), len(xt)) == (6, 2)


def _cdan():
    feature_extractor, label_head, domain_head = parts()
    return CDAN(feature_extractor, label_head, keras.Sequential([keras.layers.Dense(1, activation="sigmoid")]))


def _mdd():
    feature_extractor, label_head, _ = parts()
    return MDD(feature_extractor, label_head)


@pytest.mark.parametrize("make, name", [(dann, "DANN"), (_cdan, "CDAN"), (_mdd, "MDD")])
def test_every_input_error_names_the_method_being_trained(make, name):
    model = make()
    model.compile(keras.optimizers.SGD(0.1), "binary_crossentropy")
    x_source, y_source, x_target = domains()
    wide = np.concatenate([x_target, x_target], axis=1)
    refused = [
        ((x_source, y_source), {"target": (x_target, x_target)}),  # labeled target
        ((x_source,), {"target": x_target}),  # unlabeled source
        ((x_source, y_source[:-1]), {"target": x_target}),  # lengths differ
        ((x_source[:0], y_source[:0]), {"target": x_target}),  # empty source
        ((x_source, y_source), {"target": x_target[:0]}),  # empty target
        ((x_source, y_source), {"target": wide}),  # shapes differ
        ((x_source, y_source), {}),  # no target
    ]
    if BACKEND == "tensorflow":  # datasets of points or of batches: tf.data's
        import tensorflow as tf

        source = tf.data.Dataset.from_tensor_slices((x_source, y_source))
        refused += [
            ((tf.data.Dataset.from_tensor_slices(x_source),), {"target": x_target, "steps_per_epoch": 2}),
            ((source.batch(8),), {}),  # not paired batches
        ]
    for args, kwargs in refused:
        with pytest.raises(ValueError) as error:
            model.fit(*args, verbose=0, **kwargs)
        assert str(error.value).startswith(name), (args, kwargs, str(error.value))
        assert ("DANN" in str(error.value)) == (name == "DANN"), str(error.value)


@pytest.mark.parametrize("make, name", [(dann, "DANN"), (_cdan, "CDAN")])
def test_a_domain_loss_that_reduces_the_batch_is_refused_naming_the_method(make, name):
    model = make()
    mean = keras.ops.mean if hasattr(keras, "ops") else keras.backend.mean  # Keras 2 has no keras.ops
    model.compile(keras.optimizers.SGD(0.1), "binary_crossentropy", domain_loss=lambda y_true, y_pred: mean(y_pred))
    x_source, y_source, x_target = domains()
    # tf-keras wraps an error raised while tracing the step in "in user code:"
    # and a traceback; the original message is then a line of its own.
    with pytest.raises(
        ValueError, match=rf"(?m)^\s*(ValueError: )?{name}: the domain loss must return one loss per point"
    ):
        model.fit(x_source, y_source, target=x_target, verbose=0, steps_per_epoch=1)


@needs_tensorflow
def test_paired_dataset_called_directly_names_itself():
    from grad_reverse.adaptation import paired_dataset

    x_source, y_source, _ = domains()
    with pytest.raises(ValueError, match="^paired_dataset needs unlabeled target-domain data"):
        paired_dataset((x_source, y_source), None)
