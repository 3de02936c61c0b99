"""The CPU path switch under threads: `set_cpu_path` while kernels run on
other threads, and threads racing the first read of GRAD_REVERSE_CPU_PATH.
Every path gives the portable path's bits, so every result must be exact
whichever path a call happened to take. Runs without TensorFlow too (in
scripts/sanitize.sh, under ASan + UBSan); the op-library test needs it."""

import os
import threading

import numpy as np
import pytest

from helpers.kernels import HALF_TYPES, _kernels, op_library, run_with_cpu_path_variable

THREADS = 6
CALLS = 150
# Lengths around the vector bodies and their tails; the largest spans many
# 64-byte lines, so a path switch lands in the middle of a call's work.
LENGTHS = [1, 15, 33, 257, 4097, 70001]


def cases():
    """(x, lambda, the portable path's result) per thread: every dtype, NaN and inf included."""
    rng = np.random.default_rng(7)
    result = []
    for thread in range(THREADS):
        dtype = [np.float32, np.float64, *HALF_TYPES][thread % 4]
        x = (rng.standard_normal(LENGTHS[thread % len(LENGTHS)] + 5) * 100).astype(dtype)
        x[:3] = [np.nan, np.inf, -0.0]
        lambda_ = 0.37 * (thread + 1) * (-1) ** thread
        _kernels.set_cpu_path("portable")
        result.append((x, lambda_, _kernels.neg_scale_cpu(x, lambda_)))
    _kernels.set_cpu_path("auto")
    return result


def test_switching_the_path_while_threads_run_kernels_gives_exact_results():
    paths = _kernels.cpu_paths() + ["auto"]
    work = cases()
    failures, switches = [], [0]
    running = threading.Event()
    running.set()
    start = threading.Barrier(THREADS + 1)

    _kernels.set_cpu_path("auto")
    auto = _kernels.cpu_path()  # the environment's choice

    def switcher():
        start.wait()
        while running.is_set():
            path = paths[switches[0] % len(paths)]
            _kernels.set_cpu_path(path)
            if _kernels.cpu_path() != (auto if path == "auto" else path):
                failures.append(f"set_cpu_path({path!r}) left the path at {_kernels.cpu_path()!r}")
            switches[0] += 1

    def worker(thread):
        x, lambda_, want = work[thread]
        out = np.empty_like(x)
        start.wait()
        try:
            for call in range(CALLS):
                # Out of place, in place (a copy), and with the streaming stores forced.
                got = _kernels.neg_scale_cpu(x, lambda_)
                _kernels.neg_scale_cpu(x, lambda_, out=out, streaming=call % 2 == 0)
                in_place = x.copy()
                _kernels.neg_scale_cpu(in_place, lambda_, out=in_place)
                for result in (got, out, in_place):
                    if result.view(np.uint8).tobytes() != want.view(np.uint8).tobytes():
                        failures.append(f"thread {thread} call {call}: differs from the portable path")
        except Exception as error:  # noqa: BLE001 - reported by the main thread
            failures.append(f"thread {thread}: {type(error).__name__}: {error}")

    workers = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    switching = threading.Thread(target=switcher)
    for thread in [switching, *workers]:
        thread.start()
    for thread in workers:
        thread.join(timeout=300)
    running.clear()
    switching.join(timeout=60)
    _kernels.set_cpu_path("auto")
    assert not any(t.is_alive() for t in [switching, *workers]), "a thread hung"
    assert not failures, failures[:5]
    assert switches[0] > 2 * len(paths), switches  # the path did change under the workers


RACE = """
import threading
barrier = threading.Barrier(8)
seen, errors = [], []
x = np.linspace(-3, 3, 4101, dtype=np.float32)
def first_use():
    barrier.wait()
    try:
        out = _kernels.neg_scale_cpu(x, 0.5)
        seen.append((_kernels.cpu_path(), out.tobytes() == (x * np.float32(-0.5)).tobytes()))
    except ValueError as error:
        errors.append(str(error))
threads = [threading.Thread(target=first_use) for _ in range(8)]
[t.start() for t in threads]; [t.join() for t in threads]
print(sorted(set(seen)), len(seen), sorted(set(errors)), len(errors))
"""


@pytest.mark.parametrize("value", ["portable", "avx2", "auto"])
def test_threads_racing_the_first_read_of_the_variable_all_get_its_path(value):
    if value != "auto" and value not in _kernels.cpu_paths():
        pytest.skip(f"this CPU does not support the {value} path")
    done = run_with_cpu_path_variable(value, RACE)
    assert done.returncode == 0, done.stderr
    path = _kernels.cpu_paths()[-1] if value == "auto" else value
    assert done.stdout.split("\n")[0] == f"[('{path}', True)] 8 [] 0", done.stdout


def test_threads_racing_the_first_read_of_an_invalid_variable_all_get_the_error():
    done = run_with_cpu_path_variable("avx9000", RACE)
    assert done.returncode == 0, done.stderr
    error = "GRAD_REVERSE_CPU_PATH='avx9000' is not a CPU path; accepted here: auto, " + ", ".join(_kernels.cpu_paths())
    assert done.stdout.split("\n")[0] == f"[] 0 [{error!r}] 8", done.stdout


@pytest.mark.skipif(
    bool(os.environ.get("GRAD_REVERSE_KERNELS_DIR")),
    reason="a kernels-only build (sanitizers): no TensorFlow op library here",
)
def test_switching_the_op_library_path_while_tensorflow_runs_the_kernel():
    """The same switch through the op library's C function, while TensorFlow
    runs GradReverseGrad on its own threads (and shards a large tensor)."""
    import tensorflow as tf

    import grad_reverse

    library = op_library()
    paths = [p.encode() for p in _kernels.cpu_paths()] + [b"auto"]
    x = np.linspace(-50, 50, 1 << 21, dtype=np.float32)  # 8 MiB: split over two threads
    x[:2] = [np.nan, -np.inf]
    want = x * np.float32(-0.75)
    running, switches = threading.Event(), [0]
    running.set()

    failures = []  # an exception in a thread would only end that thread: collect it

    def switcher():
        try:
            while running.is_set():
                path = paths[switches[0] % len(paths)]
                if library.GradReverseSetCpuPath(path) != 0:
                    failures.append(f"switch to {path!r} refused")
                switches[0] += 1
        except BaseException as error:  # noqa: BLE001 (reported below)
            failures.append(f"switcher: {error!r}")

    def worker():
        try:
            dy = tf.constant(x)
            for _ in range(20):
                got = grad_reverse.ops.LIBRARY.module.grad_reverse_grad(dy, 0.75).numpy()
                if got.tobytes() != want.tobytes():
                    failures.append("differs")
        except BaseException as error:  # noqa: BLE001 (reported below)
            failures.append(f"worker: {error!r}")

    switching = threading.Thread(target=switcher)
    workers = [threading.Thread(target=worker) for _ in range(3)]
    switching.start()
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(timeout=300)
    running.clear()
    switching.join(timeout=60)
    assert library.GradReverseSetCpuPath(b"auto") == 0
    assert not [thread for thread in [*workers, switching] if thread.is_alive()], "a thread hung"
    assert not failures, failures
    assert switches[0] > len(paths)
