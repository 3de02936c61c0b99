"""The machine's memory bandwidth, measured in the same run as the cases, as
the bar for a bandwidth-bound backward (which reads dy and writes dx).

No single program reaches a machine's bandwidth everywhere: one thread cannot
saturate a multi-channel memory system, and threads cost a dispatch that
dominates small copies. So the limit is the best of several ways of moving
the same number of bytes (read + write, into a buffer allocated and touched
beforehand), each timed interleaved with the others:

* `numpy copy, N threads` for N = 1, half the usable cores and all of them:
  `np.copyto` on N slices, one per thread (numpy releases the GIL for
  copies, so the threads run in parallel): out of place, as the backward
  when it must allocate dx;
* `numpy in place, N threads`: `np.negative(a, out=a)` the same way, as the
  backward when it overwrites dy (faster where the bytes fit in a cache);
* `tf.function multiply`: TensorFlow's own `x * s` on its intra-op thread
  pool (Eigen, vectorized, sharded), out of place;
* on a GPU, a device-to-device pass (`x + 0` in a tf.function) instead.

Each way counts with its fastest round, and `Limit.gbps` is the best way: the
most this machine showed it can move in this run (not a datasheet number).
On a shared machine a median would move with the load of the moment and fall
below what a case measured a minute later; the fastest round does much less.
"""

from __future__ import annotations

import os
import statistics
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import tensorflow as tf

from grad_reverse.bench.measure import interleaved

_ALIGN = 64  # split copies on cache-line boundaries


@dataclass
class Limit:
    """Read+write bandwidth for moving `nbytes` (each way) on this machine."""

    nbytes: int
    gbps: float  # the best way's fastest round
    method: str  # which way that was
    methods: dict[str, float] = field(default_factory=dict)  # every way's GB/s in its fastest round


def usable_cores() -> int:
    """CPUs this process may run on (its affinity), or the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def thread_counts(cores: int) -> list[int]:
    """1, half the cores and all of them, without repeats."""
    return sorted({1, max(1, cores // 2), max(1, cores)})


def _slices(nbytes: int, parts: int) -> list[slice]:
    step = -(-nbytes // parts)  # ceil
    step = -(-step // _ALIGN) * _ALIGN
    return [slice(start, min(start + step, nbytes)) for start in range(0, nbytes, step)]


class Threaded:
    """`work(*part)` over the parts, one thread each (np.copyto and numpy's
    ufuncs release the GIL, so the threads run in parallel). Call `close()`
    when done: it owns a thread pool."""

    def __init__(self, work: Callable, parts: list[tuple]) -> None:
        self.work, self.parts = work, parts
        self.pool = ThreadPoolExecutor(len(parts)) if len(parts) > 1 else None

    def __call__(self) -> None:
        if self.pool is None:
            self.work(*self.parts[0])
            return
        for future in [self.pool.submit(self.work, *part) for part in self.parts]:
            future.result()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


def threaded_copy(src: np.ndarray, dst: np.ndarray, threads: int) -> Threaded:
    """`dst[:] = src`, each thread one contiguous slice: read + write, out of place."""
    return Threaded(np.copyto, [(dst[s], src[s]) for s in _slices(src.nbytes, threads)])


def threaded_negate(buffer: np.ndarray, threads: int) -> Threaded:
    """`buffer = -buffer` (float32) in place, each thread one slice: read + write of the
    same bytes, as the backward kernel does when it may overwrite dy. (Negation
    is exact: repeating it never makes denormals.)"""
    values = buffer.view(np.float32)
    step = values.itemsize
    parts = [(values[s.start // step:s.stop // step],) for s in _slices(values.nbytes, threads)]
    return Threaded(lambda part: np.negative(part, out=part), parts)


def _tensorflow_multiply(nbytes: int) -> Callable[[], object]:
    """TensorFlow's own scalar multiply over the same bytes (float32), out of place."""
    x = tf.ones([max(1, nbytes // 4)], tf.float32)
    scale = tf.constant(-0.5)
    multiply = tf.function(lambda t: t * scale)
    return lambda: multiply(x)


def _device_pass(nbytes: int, dtype: tf.DType) -> Callable[[], object]:
    x = tf.zeros([max(1, nbytes // dtype.size)], dtype)
    add = tf.function(lambda t: t + tf.zeros([], dtype))
    return lambda: add(x)


def measure_limit(nbytes: int, rounds: int, dtype: tf.DType = tf.float32) -> Limit:
    """The best read+write bandwidth of several ways of moving `nbytes` each way."""
    calls: dict[str, Callable[[], object]] = {}
    copies: list[Threaded] = []
    if tf.config.list_logical_devices("GPU"):
        calls["device pass"] = _device_pass(nbytes, dtype)
    else:
        nbytes = max(4, nbytes - nbytes % 4)  # whole float32 values for the in-place pass
        src = np.ones(nbytes, np.uint8)
        dst = np.zeros(nbytes, np.uint8)  # written once here: no page faults while timed
        for threads in thread_counts(usable_cores()):
            for name, way in (("numpy copy", threaded_copy(src, dst, threads)),
                              ("numpy in place", threaded_negate(dst, threads))):
                used = len(way.parts)  # fewer than asked for when the bytes are few
                label = f"{name}, {used} thread{'s' if used > 1 else ''}"
                if label in calls:
                    way.close()
                    continue
                copies.append(way)
                calls[label] = way
        calls["tf.function multiply"] = _tensorflow_multiply(nbytes)
    try:
        per_round = max(1, min(20, (1 << 22) // max(nbytes, 1)))
        times = interleaved(calls, rounds, per_round)
    finally:
        for copy in copies:
            copy.close()
    methods = {name: 2 * nbytes / min(samples) / 1e9 for name, samples in times.items()}
    best = max(methods, key=methods.get)
    return Limit(nbytes, methods[best], best, methods)


def kernel_bandwidth(size: int, dtype: tf.DType, rounds: int) -> float:
    """The native backward kernel alone, in place: read+write GB/s.

    A graph applies GradReverseGrad to a temporary 1 and 9 times in a row
    (each application in place); the difference is 8 passes of the kernel,
    with no allocation and no other op."""
    from grad_reverse.ops import _library

    lambda_ = tf.constant(0.5)

    def repeated(times: int):
        @tf.function
        def apply(x):
            t = x + tf.constant(0, dtype)  # a temporary the kernel may overwrite
            for _ in range(times):
                t = _library.grad_reverse_grad(t, lambda_)
            return t[:1]

        return apply

    x = tf.cast(tf.random.normal([size]), dtype)
    one, nine = repeated(1), repeated(9)
    times = interleaved({"one": lambda: one(x), "nine": lambda: nine(x)}, rounds)
    kernel = (statistics.median(times["nine"]) - statistics.median(times["one"])) / 8
    return 2 * size * dtype.size / kernel / 1e9
