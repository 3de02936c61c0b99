"""Streaming stores for a large out-of-place backward: forced on or off
(GRAD_REVERSE_STREAMING_STORES, options.set_streaming_stores) the kernels
honour the choice; under `auto` the process's first such passes of each
output size class are timed both ways and a pure function of those times
decides for that class (cc/compute/cpu_paths.h). Which wins on a machine is
measured by the bench, not asserted here."""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import grad_reverse
from grad_reverse import info, options
from grad_reverse._native import calls
from grad_reverse._tools import streaming_store_passes, streaming_stores_at
from grad_reverse.bench import cases, regime

LARGE = 1 << 22  # float32: 16 MiB, the smallest output that may stream
PAIRS = 15  # kStreamingCalibrationPairs


def decisions():
    """The decision function as the op library and the pybind11 module export it."""
    found = [lambda plain, streaming: calls.streaming_stores_win(grad_reverse.ops.LIBRARY.cdll, plain, streaming)]
    try:
        from grad_reverse import _kernels

        found.append(_kernels.streaming_stores_win)
    except ImportError:
        pass
    return found


@pytest.mark.parametrize("win", decisions())
def test_the_decision_compares_the_fastest_passes_against_a_three_percent_margin(win):
    plain = [2e-10] * 5
    assert win(plain, [1e-10] * 5) is True
    assert win(plain, plain) is False  # a tie keeps plain stores
    assert win(plain, [2e-10 / 1.02] * 5) is False  # 2 % is within the margin
    assert win(plain, [2e-10 / 1.04] * 5) is True
    # Load only slows a pass: one quiet plain pass as fast as streaming's best
    # outweighs four slow ones, and one quiet streaming pass four slow ones.
    assert win([3e-10, 3e-10, 3e-10, 3e-10, 1.5e-10], [1.5e-10] * 5) is False
    assert win([3e-10] * 4 + [2e-10], [1.9e-10, 5e-10, 5e-10, 5e-10, 5e-10]) is True
    # No measurements, or a time that is not positive: plain stores.
    assert win([], []) is False
    assert win([1.0, 0.0, 1.0], [0.5, 0.5, 0.5]) is False


@pytest.mark.parametrize("win", decisions())
def test_the_decision_depends_only_on_the_measurements(win):
    plain = [3.1e-10, 2.9e-10, 3.4e-10, 3.0e-10, 2.2e-10, 3.3e-10, 2.8e-10]
    streaming = [2.9e-10, 3.0e-10, 2.6e-10, 2.95e-10, 3.1e-10, 2.7e-10, 2.9e-10]
    first = win(plain, streaming)
    assert all(win(plain, streaming) is first for _ in range(20))
    order = [3, 0, 6, 1, 5, 2, 4]  # the pairs in another order
    assert win([plain[i] for i in order], [streaming[i] for i in order]) is first


@pytest.fixture
def restore_stores():
    yield
    options.set_streaming_stores("auto")


def _passes(size: int, in_place: bool) -> int:
    """How many streaming-store passes one float32 backward of `size` adds."""
    x, dy = tf.ones([size]), tf.fill([size], 2.0)
    layer = grad_reverse.grad_reverse
    fn = regime.in_place_function(layer, 0.5) if in_place else cases.fwd_bwd_function(layer, 0.5)
    before = streaming_store_passes()
    dx = fn(x, dy)
    assert float(dx[0]) == (1.0 if in_place else -1.0)
    return streaming_store_passes() - before


def test_a_choice_forced_at_run_time_is_what_the_kernel_uses(restore_stores):
    options.set_streaming_stores("on")
    assert options.streaming_stores() == "on (forced at run time)"
    assert streaming_stores_at(4 * LARGE) is True
    assert streaming_stores_at(4 * LARGE - 1) is False  # under 16 MiB
    assert _passes(LARGE, in_place=False) == 1
    assert _passes(LARGE, in_place=True) == 0  # in place never streams
    assert _passes(LARGE // 4, in_place=False) == 0  # 4 MiB: too small to stream
    options.set_streaming_stores("off")
    assert options.streaming_stores() == "off (forced at run time)"
    assert _passes(LARGE, in_place=False) == 0
    assert streaming_stores_at(4 * LARGE) is False
    assert info.collect()["streaming_stores"] == "off (forced at run time)"


def test_set_streaming_stores_refuses_another_mode_and_changes_nothing(restore_stores):
    options.set_streaming_stores("off")
    with pytest.raises(ValueError, match="'yes' is not one of auto, on, off"):
        options.set_streaming_stores("yes")
    assert options.streaming_stores() == "off (forced at run time)"


RUN = """
    import tensorflow as tf
    import grad_reverse
    from grad_reverse import options
    from grad_reverse._tools import streaming_store_passes, streaming_stores_at
    from grad_reverse.bench import cases
    print(options.streaming_stores())
    fn = cases.fwd_bwd_function(grad_reverse.grad_reverse, 0.5)
    for size in {sizes}:
        x, dy = tf.ones([size]), tf.ones([size])
        for _ in range({calls}):
            fn(x, dy)
    print(options.streaming_stores())
    print(streaming_store_passes())
    print(" ".join(str(streaming_stores_at(4 * size)) for size in {sizes}))
"""


def run_passes(value: str, calls: int, sizes: tuple[int, ...] = (LARGE,)) -> list[str]:
    """`calls` float32 backward passes of each size in turn, in a fresh
    process: the streaming-store state before and after, the streaming
    passes counted, and the choice at each size."""
    env = {**os.environ, options.STREAMING_STORES_VARIABLE: value, "TF_CPP_MIN_LOG_LEVEL": "2"}
    code = textwrap.dedent(RUN.format(sizes=list(sizes), calls=calls))
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.splitlines()[-4:]


@pytest.mark.parametrize("value, passes", [("on", 4), ("off", 0)])
def test_the_environment_variable_forces_the_choice(value, passes):
    # fwd_bwd_function's first call traces and runs once; each call is one pass.
    before, after, count, _ = run_passes(value, 4)
    assert before == after == f"{value} (forced: GRAD_REVERSE_STREAMING_STORES={value})"
    assert int(count) == passes


MEASURED = r"(on|off) \(fastest plain / fastest streaming pass \d+\.\d\d over 15 pairs, streaming needs > 1\.03; "


def test_auto_measures_the_first_passes_then_keeps_its_verdict():
    before, after, count, choice = run_passes("auto", 2 * PAIRS + 3)
    assert before == (
        f"not decided yet (auto: for each output size, in doublings from 16 MiB, the first {2 * PAIRS} "
        "out-of-place passes time plain and streaming stores in turn)"
    )
    found = re.fullmatch(f"auto, measured per output size: 16-32 MiB {MEASURED}.*; other sizes not decided yet", after)
    assert found, after
    verdict = found.group(1)
    # Half the samples streamed; after the verdict, the 3 passes follow it.
    assert int(count) == PAIRS + (3 if verdict == "on" else 0)
    assert choice == str(verdict == "on")


def test_auto_measures_each_size_class_on_its_own():
    # 16 MiB, then 64 MiB outputs: the second size takes its own samples
    # rather than the first size's verdict.
    _, after, count, choices = run_passes("auto", 2 * PAIRS + 3, sizes=(LARGE, 4 * LARGE))
    found = re.fullmatch(f"auto, measured per output size: 16-32 MiB {MEASURED}.*; 64-128 MiB {MEASURED}.*", after)
    assert found, after
    verdicts = found.group(1), found.group(2)
    assert int(count) == sum(PAIRS + (3 if verdict == "on" else 0) for verdict in verdicts)
    assert choices.split() == [str(verdict == "on") for verdict in verdicts]


def test_a_dann_fit_step_writes_the_gradient_into_dy_and_a_step_keeping_dy_does_not(restore_stores):
    """With streaming stores forced on, every out-of-place pass of 16 MiB or
    more is counted; in place never streams. DANN's fit sends 1024 x 4096
    float32 features (16 MiB) through the GRL: no pass counted, so the
    backward wrote into dy's buffer. A step that also returns the GRL's dy
    leaves TensorFlow nothing to forward: one pass per step."""
    from grad_reverse._keras import keras

    options.set_streaming_stores("on")
    rng = np.random.default_rng(0)
    points, width = 1024, 4096
    xs, xt = rng.standard_normal((2, points, 8)).astype("float32")
    ys = rng.integers(0, 2, points)
    keras.utils.set_random_seed(0)
    features = keras.Sequential([keras.Input((8,)), keras.layers.Dense(width, activation="relu")])
    label_head = keras.Sequential([keras.Input((width,)), keras.layers.Dense(2)])
    domain_head = keras.Sequential([keras.Input((width,)), keras.layers.Dense(1)])
    model = grad_reverse.DANN(features, label_head, domain_head)
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = streaming_store_passes()
    model.fit(xs, ys, target=xt, batch_size=points, epochs=2, verbose=0)  # 2 epochs of 2 steps (512 + 512 points)
    assert streaming_store_passes() == before

    x = tf.constant(xs)

    @tf.function
    def step_keeping_dy():
        with tf.GradientTape(persistent=True) as tape:
            h = features(x)
            tape.watch(h)
            r = grad_reverse.grad_reverse(h, 0.5)
            loss = tf.reduce_sum(domain_head(r))
        return tape.gradient(loss, r), tape.gradient(loss, h)  # dy of the GRL, kept; dx

    step_keeping_dy()
    before = streaming_store_passes()
    step_keeping_dy()
    assert streaming_store_passes() == before + 1


def test_an_invalid_variable_fails_the_kernel_naming_the_accepted_modes():
    code = """
        import tensorflow as tf
        import grad_reverse
        from grad_reverse import options
        print(options.streaming_stores())
        grad_reverse.ops.LIBRARY.module.grad_reverse_grad(tf.ones([2]), 1.0)
    """
    env = {**os.environ, options.STREAMING_STORES_VARIABLE: "maybe", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=300
    )
    message = "GRAD_REVERSE_STREAMING_STORES='maybe' is not a streaming-store mode; accepted: auto, on, off"
    assert done.returncode != 0 and "FailedPreconditionError" in done.stderr and message in done.stderr
    assert done.stdout.strip() == f"error: {message}"
