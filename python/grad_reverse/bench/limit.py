"""The machine's memory bandwidth, measured beside the cases it bounds, as
the bar for a bandwidth-bound backward (which reads dy and writes dx).

No single program reaches a machine's bandwidth everywhere: one thread cannot
saturate a multi-channel memory system, threads cost a dispatch that
dominates small copies, and a store that first reads its cache line (read for
ownership) moves a third more bytes than a streaming store. So the limit is
the best of several ways of moving the same number of bytes (read + write,
into buffers allocated and touched beforehand, as large as the case's own
tensors), each on 1 thread, half the usable cores and all of them (one
contiguous slice per thread; the work releases the GIL, so the threads run
in parallel):

* `numpy copy`: `np.copyto`, out of place (glibc's memcpy; whether it
  streams depends on the CPU and the glibc);
* `numpy in place`: `np.negative(a, out=a)`, read and write of the same
  bytes, as the backward when it overwrites dy;
* `kernel, streaming stores`: the backward kernel's own pass on raw buffers
  (`grad_reverse._kernels`, no TensorFlow), out of place with the
  non-temporal stores it uses for a large dx: the op's own access pattern,
  without TensorFlow's dispatch and allocation;
* `kernel in place`: the same kernel overwriting its input;
* `tf.function multiply`: TensorFlow's own `x * s` on its intra-op thread
  pool, out of place into a new tensor, allocation included;
* on a GPU, a device-to-device pass (`x + 0` in a tf.function) instead.

(The kernel's ways need the pybind11 module, which every CMake build has;
where it is missing they are left out and the others remain.)

The ways are timed in the same interleaved rounds as the case they bound
(`LimitWays.calls`, added to the case's calls), and the limit is the fastest
pass of any way in those rounds (`measure.limit_from_times`; the command pools
the rounds of every case of a size, `cli.read_against_pooled_limits`): load
only slows a pass, so the limit is what the machine did at its quietest
moment. (A median over rounds of each round's fastest way is no limit: where
the case moves the bytes as fast as the best way, as the kernel alone does,
noise alone reads it above 100 %.)

A memory limit bounds only passes that go to memory. Where the buffers are
not at least twice the last-level cache (`beyond_cache`), a pass runs from
the cache, at a speed that depends on the instructions more than on the
bytes, so no limit is given there: the table shows none, and says why.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf

from grad_reverse.bench.measure import Limit, interleaved, limit_from_times

# Names of the limit's ways among a case's calls.
LIMIT_PREFIX = "limit: "

_ALIGN = 64  # split copies on cache-line boundaries


def last_level_cache_bytes() -> int | None:
    """The largest CPU cache's size (Linux sysfs), or None where unknown."""
    sizes = []
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = os.listdir(root)
    except OSError:
        return None
    for entry in entries:
        try:
            with open(os.path.join(root, entry, "size")) as f:
                text = f.read().strip()
        except OSError:
            continue
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        if text[-1:].upper() in units and text[:-1].isdigit():
            sizes.append(int(text[:-1]) * units[text[-1].upper()])
        elif text.isdigit():
            sizes.append(int(text))
    return max(sizes) if sizes else None


def beyond_cache(nbytes: int, buffers: int = 2) -> bool:
    """Whether `buffers` buffers of `nbytes` take at least twice the
    last-level cache, so that a pass over them goes mostly to memory (and a
    memory limit applies). True where the cache's size is unknown."""
    cache = last_level_cache_bytes()
    return cache is None or buffers * nbytes >= 2 * cache


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


def _float32_parts(threads: int, *buffers: np.ndarray) -> list[tuple[np.ndarray, ...]]:
    """The `buffers` (equal sizes, bytes) seen as float32, cut into one
    contiguous slice per thread: a tuple of the buffers' slices per thread."""
    views = [buffer.view(np.float32) for buffer in buffers]
    step = views[0].itemsize
    return [tuple(view[s.start // step : s.stop // step] for view in views) for s in _slices(views[0].nbytes, threads)]


def threaded_negate(buffer: np.ndarray, threads: int) -> Threaded:
    """`buffer = -buffer` (float32) in place, each thread one slice: read + write of the
    same bytes, as the backward kernel does when it may overwrite dy. (Negation
    is exact: repeating it never makes denormals.)"""
    return Threaded(lambda part: np.negative(part, out=part), _float32_parts(threads, buffer))


def _raw_kernels():
    """The pybind11 module over the backward kernels, or None where this build
    has none (GRAD_REVERSE_PYBIND=OFF)."""
    try:
        from grad_reverse import _kernels
    except ImportError:
        return None
    return _kernels


def threaded_kernel(src: np.ndarray, dst: np.ndarray, threads: int, streaming: bool) -> Threaded:
    """`dst = -src` (float32) by the backward kernel itself (lambda 1: exact,
    repeating it never makes denormals), each thread one slice; in place when
    `dst` is `src`. `streaming`: write with non-temporal stores, as the kernel
    does for a large output that is not its input."""
    kernels = _raw_kernels()
    return Threaded(lambda a, b: kernels.neg_scale_cpu(a, 1.0, b, streaming), _float32_parts(threads, src, dst))


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


class LimitWays:
    """The ways of moving `nbytes` each way (see the module's doc), with their
    buffers allocated and touched once: `calls` (named `LIMIT_PREFIX + way`)
    go among a case's calls, for as many cases of that size as need them.
    Call `close()` when done: the threaded ways own thread pools."""

    def __init__(self, nbytes: int, dtype: tf.DType = tf.float32, tensorflow: bool = True) -> None:
        self.copies: list[Threaded] = []
        ways: dict[str, Callable[[], object]] = {}
        if tf.config.list_logical_devices("GPU"):
            ways["device pass"] = _device_pass(nbytes, dtype)
        else:
            nbytes = max(4, nbytes - nbytes % 4)  # whole float32 values for the in-place pass
            # Both written here (np.ones fills them), so no page faults while timed.
            # As float32 the bytes are a normal number; negating it is exact.
            src = np.ones(nbytes, np.uint8)
            dst = np.ones(nbytes, np.uint8)
            kernels = _raw_kernels() is not None
            for threads in thread_counts(usable_cores()):
                candidates = [
                    ("numpy copy", lambda threads=threads: threaded_copy(src, dst, threads)),
                    ("numpy in place", lambda threads=threads: threaded_negate(dst, threads)),
                ]
                if kernels:
                    candidates += [
                        ("kernel, streaming stores", lambda threads=threads: threaded_kernel(src, dst, threads, True)),
                        ("kernel in place", lambda threads=threads: threaded_kernel(dst, dst, threads, False)),
                    ]
                for name, make in candidates:
                    way = make()
                    used = len(way.parts)  # fewer than asked for when the bytes are few
                    label = f"{name}, {used} thread{'s' if used > 1 else ''}"
                    if label in ways:
                        way.close()
                        continue
                    self.copies.append(way)
                    ways[label] = way
            if tensorflow:
                ways["tf.function multiply"] = _tensorflow_multiply(nbytes)
        self.nbytes = nbytes
        self.calls = {LIMIT_PREFIX + name: way for name, way in ways.items()}

    def close(self) -> None:
        for copy in self.copies:
            copy.close()


def measure_limit(nbytes: int, rounds: int, dtype: tf.DType = tf.float32) -> Limit:
    """The limit for `nbytes` from its ways alone (the cases time them beside
    their own calls instead; see `LimitWays`)."""
    ways = LimitWays(nbytes, dtype)
    try:
        per_round = max(1, min(20, (1 << 22) // max(nbytes, 1)))
        times = interleaved(ways.calls, rounds, per_round)
    finally:
        ways.close()
    return limit_from_times(ways.nbytes, {name[len(LIMIT_PREFIX) :]: t for name, t in times.items()})


@dataclass
class KernelBandwidth:
    """The backward kernel alone, in place, and the limit timed in its rounds."""

    size: int  # elements
    nbytes: int  # of the buffer the kernel reads and overwrites
    gbps: float | None  # None when the kernel's time was lost in the noise (see kernel_seconds)
    limit_gbps: float | None  # None where no memory limit applies (in cache, on a GPU)
    # The limit's ways, timed in the kernel's rounds (their names, their samples).
    limit_times: dict[str, list[float]] = field(default_factory=dict)

    def fraction_of_limit(self) -> float | None:
        return self.gbps / self.limit_gbps if self.gbps and self.limit_gbps else None


def pass_times(one: list[float], nine: list[float]) -> list[float]:
    """Per round, one pass: (the 9-pass sample - the 1-pass sample) / 8, both
    taken next to each other, so a change of load between rounds cancels."""
    return [(n - o) / 8 for o, n in zip(one, nine)]


def kernel_seconds(one: list[float], nine: list[float]) -> float | None:
    """One pass of the kernel: the median over rounds of `pass_times`; None
    when that is not positive, i.e. the 8 passes took less than the noise
    between the two graphs' calls (tiny sizes, a busy machine): no figure
    rather than a negative or infinite one."""
    seconds = statistics.median(pass_times(one, nine)) if one else 0.0
    return seconds if seconds > 0 else None


def kernel_bandwidth(size: int, dtype: tf.DType, rounds: int, limit: bool = True) -> KernelBandwidth:
    """The native backward kernel alone, in place: read+write GB/s.

    A graph applies GradReverseGrad to a temporary 1 and 9 times in a row
    (each application in place); the difference is 8 passes of the kernel,
    with no allocation and no other op. With `limit`, the in-place and
    copying ways of `LimitWays` (one pass each, no graph call) run in the
    same rounds, and the limit is their fastest pass (on a CPU; on a GPU the
    limit is left out)."""
    from grad_reverse.ops import LIBRARY

    lambda_ = tf.constant(0.5)

    def repeated(times: int):
        @tf.function
        def apply(x):
            t = x + tf.constant(0, dtype)  # a temporary the kernel may overwrite
            for _ in range(times):
                t = LIBRARY.module.grad_reverse_grad(t, lambda_)
            return t[:1]

        return apply

    x = tf.cast(tf.random.normal([size]), dtype)
    one, nine = repeated(1), repeated(9)
    nbytes = size * dtype.size
    ways = LimitWays(nbytes, tensorflow=False) if limit and not tf.config.list_logical_devices("GPU") else None
    try:
        times = interleaved({"one": lambda: one(x), "nine": lambda: nine(x), **(ways.calls if ways else {})}, rounds)
    finally:
        if ways:
            ways.close()
    seconds = kernel_seconds(times.pop("one"), times.pop("nine"))
    limit_times = {name[len(LIMIT_PREFIX) :]: t for name, t in times.items()}
    limit_gbps = limit_from_times(ways.nbytes, limit_times).gbps if ways and beyond_cache(nbytes, 1) else None
    return KernelBandwidth(size, nbytes, 2 * nbytes / seconds / 1e9 if seconds else None, limit_gbps, limit_times)
