"""`grad_reverse.CDAN` (+E) and `grad_reverse.MDD` under MirroredStrategy over two
logical CPU devices: Keras `fit` ends on the weights one device reaches on
the same global batches (the adversarial term's replica scaling, the per-domain
means and CDAN's per-domain weight normalization over replicas of half the
batch), and elsewhere than the unscaled step would. One process for both
methods (this file as a script), with tests/helpers/distribute.py.
"""

from __future__ import annotations

import json
import sys

import tensorflow as tf

from helpers.distribute import (
    RESULT_MARKER,
    as_arrays,
    as_lists,
    assert_weights_close,
    max_abs_difference,
    run_scenario,
)
from helpers.models import CDAN_MDD_STEPS, cdan_mdd, cdan_mdd_batches, cdan_mdd_one_device


def mirrored_scenario() -> dict:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    result = {"replicas": strategy.num_replicas_in_sync}
    for method in ("cdan", "mdd"):
        with strategy.scope():
            model = cdan_mdd(method)
        initial = model.get_weights()
        model.fit(cdan_mdd_batches(), epochs=1, steps_per_epoch=CDAN_MDD_STEPS, verbose=0)
        result[method] = {
            "initial": as_lists(initial),
            "mirrored": as_lists(model.get_weights()),
            "single": as_lists(cdan_mdd_one_device(method, initial)),
            # A doubled adversarial term (what a missing replica scaling would train).
            "doubled": as_lists(cdan_mdd_one_device(method, initial, trade_off=2.0)),
        }
    return result


def test_mirrored_fit_equals_one_device_on_the_same_global_batches():
    result = run_scenario(["mirrored"], {}, script=__file__)
    assert result["replicas"] == 2
    for method in ("cdan", "mdd"):
        initial, mirrored, single, doubled = (
            as_arrays(result[method][k]) for k in ("initial", "mirrored", "single", "doubled")
        )
        assert max_abs_difference(single, initial) > 1e-2, method
        assert_weights_close(mirrored, single, f"MirroredStrategy {method} fit vs one device")
        assert max_abs_difference(doubled, single) > 1e-3, method


SCENARIOS = {"mirrored": mirrored_scenario}

if __name__ == "__main__":
    print(RESULT_MARKER + json.dumps(SCENARIOS[sys.argv[1]]()), flush=True)
