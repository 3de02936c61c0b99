"""`grad_reverse.CDAN` (+E) and `grad_reverse.MDD` under MirroredStrategy over two
logical CPU devices: Keras `fit` ends on the weights one device reaches on
the same global batches (the adversarial term's replica scaling, the per-domain
means and CDAN's per-domain weight normalization over replicas of half the
batch), and elsewhere than the unscaled step would. One process for both
methods (this file as a script), with the helpers of test_distribute.py.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import tensorflow as tf

from grad_reverse._keras import keras
from grad_reverse.dann import CDAN, MDD
from test_distribute import RESULT_MARKER, as_arrays, as_lists, assert_weights_close, max_abs_difference
from test_distribute import run_scenario

STEPS = 4


def global_batches() -> tf.data.Dataset:
    """The same global batch of 8 source + 8 target points every step."""
    rng = np.random.default_rng(0)
    x_source = rng.standard_normal((8, 2)).astype("float32")
    y_source = (x_source[:, 0] > 0).astype("int32")
    x_target = (rng.standard_normal((8, 2)) + [1.0, -0.5]).astype("float32")
    return tf.data.Dataset.from_tensors(((x_source, x_target), y_source)).repeat()


def make(method: str, trade_off: float = 1.0) -> keras.Model:
    keras.utils.set_random_seed(0)
    feature_extractor = keras.Sequential([keras.Input((2,)), keras.layers.Dense(4, activation="tanh")])
    label_head = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
    if method == "cdan":
        domain_head = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
        model = CDAN(feature_extractor, label_head, domain_head, entropy_conditioning=True,
                     lambda_schedule="constant")
        model.compile(keras.optimizers.SGD(0.3), "sparse_categorical_crossentropy", domain_loss_weight=trade_off)
    else:
        model = MDD(feature_extractor, label_head, lambda_schedule="constant", lambda_max=0.5, trade_off=trade_off)
        model.compile(keras.optimizers.SGD(0.3), "sparse_categorical_crossentropy")
    model(np.zeros((1, 2), "float32"))
    return model


def one_device(method: str, initial: list, trade_off: float = 1.0) -> list:
    model = make(method, trade_off)
    model.set_weights(initial)
    model.fit(global_batches(), epochs=1, steps_per_epoch=STEPS, verbose=0)
    return model.get_weights()


def mirrored_scenario() -> dict:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    result = {"replicas": strategy.num_replicas_in_sync}
    for method in ("cdan", "mdd"):
        with strategy.scope():
            model = make(method)
        initial = model.get_weights()
        model.fit(global_batches(), epochs=1, steps_per_epoch=STEPS, verbose=0)
        result[method] = {"initial": as_lists(initial), "mirrored": as_lists(model.get_weights()),
                          "single": as_lists(one_device(method, initial)),
                          # A doubled adversarial term (what a missing replica scaling would train).
                          "doubled": as_lists(one_device(method, initial, trade_off=2.0))}
    return result


def test_mirrored_fit_equals_one_device_on_the_same_global_batches():
    result = run_scenario(["mirrored"], {}, script=__file__)
    assert result["replicas"] == 2
    for method in ("cdan", "mdd"):
        initial, mirrored, single, doubled = (as_arrays(result[method][k])
                                              for k in ("initial", "mirrored", "single", "doubled"))
        assert max_abs_difference(single, initial) > 1e-2, method
        assert_weights_close(mirrored, single, f"MirroredStrategy {method} fit vs one device")
        assert max_abs_difference(doubled, single) > 1e-3, method


SCENARIOS = {"mirrored": mirrored_scenario}

if __name__ == "__main__":
    print(RESULT_MARKER + json.dumps(SCENARIOS[sys.argv[1]]()), flush=True)
