"""Reliability: many threads at once, the backward's memory (no new buffer
for a forwardable dy), and a half tensor of more than 2^31 elements."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import grad_reverse
from grad_reverse.bench import backward_allocations
from helpers.distribute import script_environment
from helpers.tensors import DTYPES, as_numpy, assert_bitwise_equal, bits, random_tensor
from helpers.tensors import native_forward_backward as forward_backward

RESULT_MARKER = "RESULT "


def minus_lambda_times(dy: np.ndarray, lambda_: float) -> np.ndarray:
    """-lambda * dy in numpy, rounded like the kernels: lambda is a float32;
    double multiplies in double, the others in float32, rounded once."""
    lambda32 = np.float32(lambda_)
    if dy.dtype == np.float64:
        return dy * -np.float64(lambda32)
    return (dy.astype(np.float32) * -lambda32).astype(dy.dtype)


# ---------------------------------------------------------------- concurrency

THREADS, CALLS, LAMBDAS_PER_THREAD = 8, 1000, 40


def thread_lambda(thread: int, k: int) -> float:
    # Distinct per thread (sign, magnitude) and per call: 8 x 40 values, more
    # than the 256 eager lambda constants grad_reverse caches, so threads also
    # evict that cache under each other.
    return (-1) ** thread * (thread + 1) * 0.37 * (1 + k / 64)


@pytest.mark.parametrize("mode", ["eager", "tf.function"])
def test_eight_threads_of_1000_calls_each_give_exact_results(mode):
    functions = {
        dtype: tf.function(
            lambda x, dy, lambda_: forward_backward(x, dy, lambda_),
            input_signature=[tf.TensorSpec(None, dtype), tf.TensorSpec(None, dtype), tf.TensorSpec([], tf.float32)],
        )
        for dtype in DTYPES
    }
    cases = []
    for thread in range(THREADS):
        dtype = DTYPES[thread % len(DTYPES)]  # every dtype on two threads
        x = random_tensor([37], dtype, seed=100 + thread)
        dy = random_tensor([37], dtype, seed=200 + thread)
        lambdas = [thread_lambda(thread, k) for k in range(LAMBDAS_PER_THREAD)]
        cases.append(
            {
                "x": x,
                "dy": dy,
                "x_bits": bits(x),
                "lambdas": lambdas if mode == "eager" else [tf.constant(v, tf.float32) for v in lambdas],
                "dx_bits": [bits(minus_lambda_times(as_numpy(dy), v)) for v in lambdas],
                "call": forward_backward if mode == "eager" else functions[dtype],
            }
        )
    start = threading.Barrier(THREADS)
    failures: list[str] = []
    done = [0] * THREADS

    def worker(thread: int) -> None:
        case = cases[thread]
        try:
            start.wait(timeout=60)
            for i in range(CALLS):
                k = i % LAMBDAS_PER_THREAD
                y, dx = case["call"](case["x"], case["dy"], case["lambdas"][k])
                if not np.array_equal(bits(y), case["x_bits"]):
                    failures.append(f"thread {thread} call {i}: forward differs from x")
                if not np.array_equal(bits(dx), case["dx_bits"][k]):
                    failures.append(f"thread {thread} call {i}: backward differs from -lambda*dy")
                done[thread] += 1
        except Exception as error:  # noqa: BLE001 - reported by the main thread
            failures.append(f"thread {thread}: {type(error).__name__}: {error}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    seconds = time.perf_counter() - began
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    assert failures == [], failures[:10]
    assert done == [CALLS] * THREADS
    print(f"{mode}: {THREADS} threads x {CALLS} calls, all exact, {seconds:.2f} s")
    if mode == "tf.function":
        assert all(f.experimental_get_tracing_count() <= 1 for f in functions.values())


# ------------------------------------------------------- backward allocations

ALLOCATION_SIZE = 1 << 20


def test_backward_on_a_forwardable_dy_allocates_no_new_buffer(dtype):
    # TensorFlow's per-node allocation records of a traced Session step, for
    # the nodes of the backward alone; dy is a graph temporary (x + 1) that
    # nothing else reads, so GradReverseGrad can write into it.
    assert backward_allocations("native", ALLOCATION_SIZE, dtype) == 0


def test_the_allocation_check_sees_the_reference_allocating_for_float16():
    # The same check on the pure-Python version, whose float16 backward goes
    # through float32 temporaries: at least one full-size buffer, so a
    # backward that allocated would fail the test above.
    allocated = backward_allocations("reference", ALLOCATION_SIZE, tf.float16)
    assert allocated >= ALLOCATION_SIZE * tf.float16.size


# ----------------------------------------------------------- a large tensor

LARGE_N = 2**31 + 7
PERIOD = 45  # LARGE_N = 45 * 47721859: tf.tile builds x in one allocation
LARGE_LAMBDA = 0.3
EDGE = 8
LARGE_NEEDS_BYTES = 16 * 2**30  # 4 GiB tensor, margin for a failure mode that copies it twice


def available_memory_bytes() -> int:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def large_pattern() -> np.ndarray:
    # Values whose double is exact in half: dy = 2 * y adds no rounding of its own.
    return ((np.arange(PERIOD) - 22) * 0.125 + 0.0625).astype(np.float16)


def resident_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def large_scenario() -> dict:
    """Forward and backward of a 2^31 + 7 element half tensor in one
    tf.function: x = tile(pattern); y = GRL(x); dy = 2 * y, made in the graph
    after y's edges are read, so nothing else holds it and GradReverseGrad
    writes dx into dy's buffer. Returns the first and last EDGE elements of
    y and dx, the time and the process's memory."""

    @tf.function
    def reverse_large(pattern, lambda_):
        x = tf.tile(pattern, [LARGE_N // PERIOD])
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = grad_reverse.grad_reverse(x, lambda_)
        y_edges = tf.concat([y[:EDGE], y[-EDGE:]], 0) * tf.constant(1, tf.float16)  # a copy, not a view
        with tf.control_dependencies([y_edges]):
            dy = y * tf.constant(2, tf.float16)
        dx = tape.gradient(y, x, output_gradients=dy)
        return y_edges, tf.concat([dx[:EDGE], dx[-EDGE:]], 0), tf.size(dx, out_type=tf.int64)

    rss_before = resident_bytes()
    began = time.perf_counter()
    y_edges, dx_edges, size = reverse_large(tf.constant(large_pattern()), tf.constant(LARGE_LAMBDA))
    seconds = time.perf_counter() - began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return {
        "size": int(size),
        "seconds": seconds,
        "rss_before": rss_before,
        "peak_rss": peak,
        "y_edges": y_edges.numpy().view(np.uint16).tolist(),
        "dx_edges": dx_edges.numpy().view(np.uint16).tolist(),
    }


@pytest.mark.slow
@pytest.mark.skipif(
    available_memory_bytes() < LARGE_NEEDS_BYTES,
    reason=f"needs {LARGE_NEEDS_BYTES / 2**30:.0f} GiB of available memory for a 4 GiB half tensor "
    f"(has {available_memory_bytes() / 2**30:.1f} GiB)",
)
def test_half_tensor_of_2_31_plus_7_elements_is_exact_at_both_ends_and_done_in_place():
    # In a fresh process: its peak memory is then this computation's alone,
    # and the 4 GiB go back to the system when it exits.
    env = script_environment(CUDA_VISIBLE_DEVICES="-1", TF_CPP_MIN_LOG_LEVEL="2")
    process = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "large"], env=env, capture_output=True, text=True, timeout=600
    )
    lines = [line for line in process.stdout.splitlines() if line.startswith(RESULT_MARKER)]
    assert process.returncode == 0 and lines, f"exit {process.returncode}\n{process.stderr[-4000:]}"
    result = json.loads(lines[-1][len(RESULT_MARKER) :])

    assert result["size"] == LARGE_N
    pattern = large_pattern()
    indices = np.r_[0:EDGE, LARGE_N - EDGE : LARGE_N]  # the last 7 lie past 2^31
    x_edges = pattern[indices % PERIOD]
    y_edges = np.asarray(result["y_edges"], np.uint16).view(np.float16)
    dx_edges = np.asarray(result["dx_edges"], np.uint16).view(np.float16)
    assert_bitwise_equal(y_edges, x_edges)
    assert_bitwise_equal(dx_edges, minus_lambda_times(x_edges * np.float16(2), LARGE_LAMBDA))

    tensor_bytes = LARGE_N * 2
    growth = result["peak_rss"] - result["rss_before"]
    print(
        f"2^31+7 half: {result['seconds']:.1f} s, peak RSS {result['peak_rss'] / 2**30:.2f} GiB "
        f"(+{growth / 2**30:.2f} GiB for a {tensor_bytes / 2**30:.2f} GiB tensor)"
    )
    # One full-size buffer for the whole step: x's, which y shares, dy takes
    # over (TensorFlow forwards it through the multiply) and dx takes over
    # (GradReverseGrad in place). A backward that allocated would need two.
    assert growth < 1.5 * tensor_bytes, f"peak grew by {growth / 2**30:.2f} GiB"


SCENARIOS = {"large": large_scenario}

if __name__ == "__main__":
    print(RESULT_MARKER + json.dumps(SCENARIOS[sys.argv[1]]()), flush=True)
