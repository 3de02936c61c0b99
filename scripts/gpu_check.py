#!/usr/bin/env python3
"""Device check of the CUDA GradReverseGrad kernel (out = -lambda * in), without TensorFlow.

Issue 3, item 6. Meant for a bare GPU machine that has CuPy but no TensorFlow:
it imports the pybind11 kernel module as the top-level `_kernels` from a CMake
build directory (scripts/gpu_check.sh builds it; the `grad_reverse` package
cannot be imported there because it imports TensorFlow), and

1. checks correctness for float16, bfloat16, float32 and float64 at sizes
   0, 1, 3, 4097 and 2^24+3: out of place with aligned pointers, with both
   pointers starting at element 1 (vectorized path with a scalar head), with
   only one of them misaligned (scalar path), in place (aligned and at element
   1), and on a non-default stream. Every result is compared bitwise (any NaN
   matches any NaN) with the CPU kernel `_kernels.neg_scale_cpu`, which is in
   turn compared with an independent numpy computation; sentinels around every
   output catch writes past either end, and inputs are checked unchanged;
2. re-runs itself with --small under `compute-sanitizer` (memcheck, then
   racecheck while the time budget allows);
3. measures the kernel's bandwidth (out of place and in place) against a
   device-to-device cudaMemcpyAsync of the same bytes, at 256 MiB and 1 GiB,
   timing with CUDA events over interleaved repetitions (median), and counting
   bytes read plus bytes written (2 x size) for both;

then prints a table and writes JSON to $OUT/gpu_check.json when OUT is set
(or to --json). Exit status: 0 when everything is correct, 1 on any
correctness failure (sanitizer errors included), 2 when the check could not
run (no GPU, module built without CUDA, ...). The bandwidth target (kernel
>= 0.90 x copy at >= 256 MiB for float32 and float16) is reported, not
enforced: timings on a shared machine are evidence, not a pass/fail gate.

--cpu-only runs every CPU-side part on the host, with the CPU kernel standing
in for the device and time.perf_counter for CUDA events: argument parsing,
references, the case and guard logic, the --small re-invocation (without a
sanitizer), the bandwidth table and the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from typing import Callable, Optional

import numpy as np

try:  # ships with TensorFlow and JAX; optional on a bare machine
    import ml_dtypes
except ImportError:
    ml_dtypes = None

DTYPES = ("float16", "bfloat16", "float32", "float64")
# Arrays are held in these types; bfloat16 as its raw 16 bits (CuPy and numpy
# have no bfloat16, and the kernel module takes a uint16 array with
# dtype="bfloat16").
STORAGE = {"float16": np.float16, "bfloat16": np.uint16, "float32": np.float32, "float64": np.float64}
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}

SIZES = (0, 1, 3, 4097, (1 << 24) + 3)
SMALL_SIZES = (0, 1, 3, 4097)
LAMBDAS = (0.3, 0.0, 1.0, 6.0, 30.0, -1.0, 1e-3)
SMALL_LAMBDAS = (0.3, -1.0)
# Sizes from here up are checked with the first lambda only: the CPU
# reference is single-threaded and the run must stay short.
ALL_LAMBDAS_BELOW = 1 << 20
GUARD = 8  # sentinel elements after every output (and before it, see `lead`)
VECTOR_BYTES = 16  # the kernel's vector width: leads of 16 bytes keep alignment

TARGET_RATIO = 0.90
TARGET_DTYPES = ("float32", "float16")
TARGET_MIN_BYTES = 256 << 20
SANITIZER_ERROR_EXIT = 86
SMALL_MARKER = "gpu_check --small:"
SANITIZER_CAP_S = {"memcheck": 150, "racecheck": 100, "initcheck": 100, "synccheck": 100}

EXIT_OK, EXIT_FAILED, EXIT_SETUP = 0, 1, 2


class SetupError(RuntimeError):
    """The check cannot run here (as opposed to: it ran and found a bug)."""


def log(message: str = "") -> None:
    print(message, flush=True)


# --------------------------------------------------------------- values ----

def bfloat16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def float32_to_bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, round to nearest even; NaN stays a quiet NaN.

    The fallback when ml_dtypes is absent, and an independent check of the
    CPU kernel's rounding either way. Works in uint64 so the rounding carry
    cannot wrap."""
    b = np.ascontiguousarray(values, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    quiet_nan = ((b >> 16) | 0x40).astype(np.uint16)
    return np.where((b & 0x7FFFFFFF) > 0x7F800000, quiet_nan, rounded)


def to_storage(name: str, values) -> np.ndarray:
    values = np.asarray(values)
    if name == "bfloat16":
        return float32_to_bfloat16_bits(values.astype(np.float32))
    return values.astype(STORAGE[name])


def is_nan(name: str, a: np.ndarray) -> np.ndarray:
    if name == "bfloat16":
        return (a & 0x7FFF) > 0x7F80
    return np.isnan(a)


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(UINT[a.dtype.itemsize])


def special_values(name: str) -> np.ndarray:
    """Signed zeros, infinities, NaN, the extremes, the smallest normal and
    subnormals: where rounding and overflow differ first."""
    if name == "bfloat16":
        return np.array([0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x7F7F, 0xFF7F, 0x0080,
                         0x0001, 0x8001, 0x3F80, 0xBF80], np.uint16)
    fi = np.finfo(STORAGE[name])
    return np.array([0.0, -0.0, np.inf, -np.inf, np.nan, fi.max, -fi.max, fi.tiny,
                     fi.smallest_subnormal, -fi.smallest_subnormal, 1.0, -1.0], STORAGE[name])


def make_values(name: str, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` values in storage type: random (scale 100, so x30 overflows no
    half), with the special values at both ends when there is room (the ends
    are what the head and tail code paths see)."""
    x = to_storage(name, rng.standard_normal(count) * 100.0)
    specials = special_values(name)
    if count >= 4 * len(specials):
        x[: len(specials)] = specials
        x[-len(specials):] = specials[::-1]
    return x


def sentinel(name: str) -> np.ndarray:
    """A normal value no output of the checks is expected to hold by chance."""
    return to_storage(name, [-1234.5])[0]


# ----------------------------------------------------------- references ----

def numpy_reference(name: str, x: np.ndarray, lambda_: float) -> np.ndarray:
    """-lambda * x computed by numpy alone: lambda as float32; float and double
    one multiply; half and bfloat16 in float32, rounded once to nearest even
    (numpy's float16 cast; bit arithmetic for bfloat16)."""
    scale = -np.float32(lambda_)
    with np.errstate(all="ignore"):
        if name == "float32":
            return x * scale
        if name == "float64":
            return x * np.float64(scale)
        if name == "float16":
            return (x.astype(np.float32) * scale).astype(np.float16)
        return float32_to_bfloat16_bits(bfloat16_bits_to_float32(x) * scale)


def host_view_dtype(name: str, use_ml_dtypes: bool):
    """The numpy dtype `_kernels.neg_scale_cpu` takes for `name`, or None
    (bfloat16 needs ml_dtypes)."""
    if name == "bfloat16":
        return ml_dtypes.bfloat16 if (use_ml_dtypes and ml_dtypes is not None) else None
    return STORAGE[name]


def cpu_kernel(kernels, name: str, x: np.ndarray, lambda_: float, use_ml_dtypes: bool) -> Optional[np.ndarray]:
    """The CPU kernel's answer in storage type, or None where it cannot be called."""
    view = host_view_dtype(name, use_ml_dtypes)
    if view is None:
        return None
    out = kernels.neg_scale_cpu(np.ascontiguousarray(x).view(view), lambda_)
    return np.asarray(out).view(STORAGE[name])


def compare(name: str, got: np.ndarray, want: np.ndarray) -> tuple[int, Optional[int]]:
    """(mismatches, first mismatching index): bitwise, except that a NaN
    matches a NaN of any payload (the CPU keeps payloads, the GPU may not)."""
    if got.shape != want.shape:
        return max(got.size, want.size, 1), 0
    bad = bits(got) != bits(want)
    if bad.any():
        bad &= ~(is_nan(name, got) & is_nan(name, want))
    count = int(np.count_nonzero(bad))
    return count, (int(np.argmax(bad)) if count else None)


def describe(name: str, a: np.ndarray, index: Optional[int]):
    if index is None or index >= a.size:
        return None
    value = float(bfloat16_bits_to_float32(a[index : index + 1])[0]) if name == "bfloat16" else float(a[index])
    return {"bits": hex(int(bits(a[index : index + 1])[0])), "value": repr(value)}


# ------------------------------------------------------------- backends ----

class CudaBackend:
    """CuPy arrays on device 0, the CUDA kernel, CUDA events."""

    kind = "cuda"

    def __init__(self, kernels, exact_allocations: bool):
        try:
            import cupy
        except ImportError as error:
            raise SetupError(f"CuPy is needed for the device check ({error}); use --cpu-only without a GPU") from error
        self.cp = cupy
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except cupy.cuda.runtime.CUDARuntimeError as error:
            raise SetupError(f"no usable CUDA device: {error}") from error
        if count < 1:
            raise SetupError("no CUDA device")
        if not kernels.cuda_compiled_in():
            raise SetupError("the kernel module was built without CUDA (configure with -DGRAD_REVERSE_CUDA=ON)")
        self.kernels = kernels
        if exact_allocations:
            # No memory pool: every array is its own cudaMalloc, so memcheck
            # sees an access past an array's end as out of bounds.
            cupy.cuda.set_allocator(None)
        # Non-blocking: it does not synchronize with the legacy default stream
        # that the other cases use, so the stream argument really is honoured.
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self._start, self._end = cupy.cuda.Event(), cupy.cuda.Event()

    def info(self) -> dict:
        cp = self.cp
        props = cp.cuda.runtime.getDeviceProperties(0)
        name = props.get("name", b"?")
        free, total = cp.cuda.runtime.memGetInfo()
        return {
            "name": name.decode() if isinstance(name, bytes) else str(name),
            "compute_capability": f"{props.get('major')}.{props.get('minor')}",
            "multiprocessors": props.get("multiProcessorCount"),
            "memory_bytes": int(total),
            "memory_free_bytes": int(free),
            "l2_cache_bytes": props.get("l2CacheSize"),
            "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
            "cuda_driver": cp.cuda.runtime.driverGetVersion(),
            "cupy": cp.__version__,
        }

    def upload(self, host: np.ndarray):
        return self.cp.asarray(host)

    def download(self, device) -> np.ndarray:
        return self.cp.asnumpy(device)

    def synchronize(self) -> None:
        self.cp.cuda.runtime.deviceSynchronize()

    def neg_scale(self, name: str, src, dst, lambda_: float, on_stream: bool = False) -> None:
        if on_stream:
            # Uploads from pageable memory may still be in flight on the legacy
            # stream, which a non-blocking stream does not wait for.
            self.synchronize()
            self.kernels.neg_scale_cuda(src, dst, lambda_, stream=self.stream.ptr, dtype=name)
            self.stream.synchronize()
        else:
            self.kernels.neg_scale_cuda(src, dst, lambda_, dtype=name)

    # bandwidth
    def alloc_bytes(self, nbytes: int):
        buffer = self.cp.empty(nbytes, self.cp.uint8)
        # 0x3F in every byte is a normal number in all four types.
        self.cp.cuda.runtime.memset(buffer.data.ptr, 0x3F, nbytes)
        self.synchronize()
        return buffer

    def view(self, buffer, name: str, count: int):
        return buffer[: count * np.dtype(STORAGE[name]).itemsize].view(STORAGE[name])

    def timed_ops(self, name: str, src, dst, nbytes: int) -> dict[str, Callable[[], None]]:
        runtime, stream, kernels = self.cp.cuda.runtime, self.stream.ptr, self.kernels
        return {
            "copy": lambda: runtime.memcpyAsync(dst.data.ptr, src.data.ptr, nbytes,
                                                runtime.memcpyDeviceToDevice, stream),
            # lambda 1: in place, values only flip sign, so they stay normal.
            "kernel": lambda: kernels.neg_scale_cuda(src, dst, 1.0, stream=stream, dtype=name),
            "kernel_in_place": lambda: kernels.neg_scale_cuda(dst, dst, 1.0, stream=stream, dtype=name),
        }

    def time_ms(self, op: Callable[[], None], inner: int) -> float:
        # One untimed launch first keeps the GPU busy while Python records the
        # start event and enqueues the timed launches, so the interval holds
        # no idle time spent waiting for the host.
        op()
        self._start.record(self.stream)
        for _ in range(inner):
            op()
        self._end.record(self.stream)
        self._end.synchronize()
        return self.cp.cuda.get_elapsed_time(self._start, self._end) / inner


class HostBackend:
    """--cpu-only: numpy arrays, the CPU kernel, time.perf_counter."""

    kind = "cpu"

    def __init__(self, kernels, use_ml_dtypes: bool):
        self.kernels = kernels
        self.use_ml_dtypes = use_ml_dtypes

    def info(self) -> dict:
        return {"name": f"host CPU ({platform.machine()}), CPU kernel standing in for the device",
                "cuda_compiled_in": bool(self.kernels.cuda_compiled_in())}

    def upload(self, host: np.ndarray) -> np.ndarray:
        return np.array(host, copy=True)

    def download(self, device: np.ndarray) -> np.ndarray:
        return np.array(device, copy=True)

    def synchronize(self) -> None:
        pass

    def can_run(self, name: str) -> bool:
        return host_view_dtype(name, self.use_ml_dtypes) is not None

    def neg_scale(self, name: str, src, dst, lambda_: float, on_stream: bool = False) -> None:
        view = host_view_dtype(name, self.use_ml_dtypes)
        self.kernels.neg_scale_cpu(src.view(view), lambda_, out=dst.view(view))

    def alloc_bytes(self, nbytes: int) -> np.ndarray:
        return np.full(nbytes, 0x3F, np.uint8)

    def view(self, buffer, name: str, count: int):
        return buffer[: count * np.dtype(STORAGE[name]).itemsize].view(STORAGE[name])

    def timed_ops(self, name: str, src, dst, nbytes: int) -> dict[str, Callable[[], None]]:
        view = host_view_dtype(name, self.use_ml_dtypes)
        s, d, k = src.view(view), dst.view(view), self.kernels
        return {
            "copy": lambda: np.copyto(dst, src),
            "kernel": lambda: k.neg_scale_cpu(s, 1.0, out=d),
            "kernel_in_place": lambda: k.neg_scale_cpu(d, 1.0, out=d),
        }

    def time_ms(self, op: Callable[[], None], inner: int) -> float:
        start = time.perf_counter()
        for _ in range(inner):
            op()
        return (time.perf_counter() - start) * 1e3 / inner


# ---------------------------------------------------------- correctness ----

def reference_self_check(kernels, use_ml_dtypes: bool) -> list[dict]:
    """Every 16-bit pattern through the CPU kernel and the numpy references
    (and the bit-arithmetic bfloat16 rounding against ml_dtypes), so the
    oracle the device results are compared with is itself checked."""
    records = []
    every = np.arange(1 << 16, dtype=np.uint16)
    for lambda_ in LAMBDAS:
        for name in ("float16", "bfloat16"):
            x = every.view(STORAGE[name])
            want = numpy_reference(name, x, lambda_)
            got = cpu_kernel(kernels, name, x, lambda_, use_ml_dtypes)
            if got is not None:
                records.append(_record(name, x.size, lambda_, "cpu_kernel_vs_numpy_all_16_bit", compare(name, got, want), got, want))
        if ml_dtypes is not None and use_ml_dtypes:
            with np.errstate(all="ignore"):  # NaN and overflow are among the inputs on purpose
                f = bfloat16_bits_to_float32(every) * -np.float32(lambda_)
            mine = float32_to_bfloat16_bits(f)
            theirs = f.astype(ml_dtypes.bfloat16).view(np.uint16)
            records.append(_record("bfloat16", every.size, lambda_, "bit_rounding_vs_ml_dtypes",
                                   compare("bfloat16", mine, theirs), mine, theirs))
    return records


def _record(name, n, lambda_, case, result, got=None, want=None, guards_ok=True) -> dict:
    mismatches, first = result
    record = {"dtype": name, "n": int(n), "lambda": lambda_, "case": case,
              "ok": mismatches == 0 and guards_ok, "mismatches": mismatches, "guards_ok": guards_ok}
    if mismatches and got is not None:
        record["first_mismatch"] = {"index": first, "got": describe(name, got, first), "want": describe(name, want, first)}
    return record


def check_dtype_size(backend, kernels, name: str, n: int, lambda_: float, rng, use_ml_dtypes: bool) -> list[dict]:
    records = []
    storage = STORAGE[name]
    itemsize = np.dtype(storage).itemsize
    aligned_lead = VECTOR_BYTES // itemsize  # keeps a 16-byte-aligned base aligned
    x = make_values(name, n + 1, rng)
    reference = numpy_reference(name, x, lambda_)
    want = cpu_kernel(kernels, name, x, lambda_, use_ml_dtypes)
    if want is None:  # bfloat16 without ml_dtypes: the numpy computation is the oracle
        want = reference
    else:
        records.append(_record(name, n, lambda_, "cpu_kernel_vs_numpy", compare(name, want, reference), want, reference))
    if hasattr(backend, "can_run") and not backend.can_run(name):
        return records

    guard_value = sentinel(name)

    def guarded(lead: int, body: Optional[np.ndarray]):
        host = np.full(lead + n + GUARD, guard_value, storage)
        if body is not None:
            host[lead : lead + n] = body
        return backend.upload(host)

    def finish(case: str, buffer, lead: int, expected: np.ndarray) -> None:
        got_all = backend.download(buffer)
        got = got_all[lead : lead + n]
        guards = np.concatenate([got_all[:lead], got_all[lead + n :]])
        guards_ok = bool(np.all(bits(guards) == bits(np.full(guards.size, guard_value, storage))))
        records.append(_record(name, n, lambda_, case, compare(name, got, expected), got, expected, guards_ok))

    # Each input ends where its allocation ends, so memcheck (with exact
    # allocations) flags any read past the last element.
    in_aligned = backend.upload(x[:n])
    in_full = backend.upload(x)
    in_offset1 = in_full[1:]
    out_of_place = [
        # case, input, output lead, expected, on the non-default stream
        ("aligned", in_aligned, aligned_lead, want[:n], False),
        ("offset1", in_offset1, 1, want[1:], False),  # both at element 1: vector path with a head
        ("offset1_in_aligned_out", in_offset1, aligned_lead, want[1:], False),  # scalar path
        ("aligned_in_offset1_out", in_aligned, 1, want[:n], False),  # scalar path
        ("stream", in_aligned, aligned_lead, want[:n], True),
    ]
    for case, src, lead, expected, on_stream in out_of_place:
        out = guarded(lead, None)
        backend.neg_scale(name, src, out[lead : lead + n], lambda_, on_stream)
        finish(case, out, lead, expected)
    for case, lead, body, expected in (("in_place", aligned_lead, x[:n], want[:n]),
                                       ("in_place_offset1", 1, x[1:], want[1:])):
        buffer = guarded(lead, body)
        view = buffer[lead : lead + n]
        backend.neg_scale(name, view, view, lambda_)
        finish(case, buffer, lead, expected)
    unchanged = (compare(name, backend.download(in_aligned), x[:n])[0] == 0
                 and compare(name, backend.download(in_full), x)[0] == 0)
    records.append(_record(name, n, lambda_, "inputs_unchanged", (0 if unchanged else 1, None)))
    return records


def run_correctness(backend, kernels, sizes, lambdas, use_ml_dtypes: bool, records: list[dict]) -> None:
    """Appends to `records` as it goes, so an exception keeps what ran before it."""
    records += reference_self_check(kernels, use_ml_dtypes)
    bad = [r for r in records if not r["ok"]]
    log(f"reference self-check (all 16-bit values, {len(LAMBDAS)} lambdas): "
        f"{len(records) - len(bad)}/{len(records)} ok")
    for name in DTYPES:
        if hasattr(backend, "can_run") and not backend.can_run(name):
            log(f"  {name}: no CPU kernel for it without ml_dtypes: device cases skipped in --cpu-only")
        for n in sizes:
            start = time.perf_counter()
            rng = np.random.default_rng(n * 7 + DTYPES.index(name))
            these = lambdas if n < ALL_LAMBDAS_BELOW else lambdas[:1]
            group = []
            for lambda_ in these:
                try:
                    group += check_dtype_size(backend, kernels, name, n, lambda_, rng, use_ml_dtypes)
                except Exception as error:
                    raise RuntimeError(f"while checking {name} n={n} lambda={lambda_}: "
                                       f"{type(error).__name__}: {error}") from error
            failed = [r for r in group if not r["ok"]]
            cases = sorted({r["case"] for r in group})
            log(f"  {name:8s} n={n:<9d} {len(these)} lambda(s) x {len(cases)} cases: "
                f"{'ok' if not failed else f'{len(failed)} FAILED'}  ({time.perf_counter() - start:.1f} s)")
            for r in failed[:5]:
                log(f"    FAILED {json.dumps(r)}")
            records += group


# ------------------------------------------------------------ sanitizer ----

def find_compute_sanitizer() -> Optional[str]:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    roots.append("/usr/local/cuda")  # the toolkit's default install location
    for root in filter(None, roots):
        for relative in ("bin/compute-sanitizer", "compute-sanitizer/compute-sanitizer"):
            candidate = os.path.join(root, relative)
            if os.access(candidate, os.X_OK):
                return candidate
    return None


def summary_lines(output: str) -> list[str]:
    keys = ("ERROR SUMMARY", "RACECHECK SUMMARY", "Device not supported", "not supported")
    return [line.strip() for line in output.splitlines() if any(k in line for k in keys)][-3:]


def run_sanitizers(args, tools: list[str], deadline: float) -> list[dict]:
    """Runs this script's --small mode under each tool. Status: clean, errors
    (the tool found some: a failure), failed (the checks failed under the
    tool: a failure), timeout / unavailable / skipped (no verdict)."""
    child = [sys.executable, os.path.abspath(__file__), "--small", "--build-dir", args.build_dir]
    if args.cpu_only:
        child.append("--cpu-only")
    if args.no_ml_dtypes:
        child.append("--no-ml-dtypes")
    exe = None if args.cpu_only else find_compute_sanitizer()
    results = []
    for tool in tools:
        remaining = deadline - time.time()
        if remaining < 30:
            results.append({"tool": tool, "status": "skipped", "reason": f"time budget ({remaining:.0f} s left)"})
            log(f"sanitizer {tool}: skipped, {remaining:.0f} s left in the time budget")
            continue
        if args.cpu_only:
            # No GPU: exercise the re-invocation itself, without a sanitizer.
            command = child
        elif exe is None:
            results.append({"tool": tool, "status": "unavailable", "reason": "compute-sanitizer not found"})
            log(f"sanitizer {tool}: compute-sanitizer not found (PATH, CUDA_HOME, nvcc's toolkit)")
            continue
        else:
            command = [exe, "--tool", tool, "--error-exitcode", str(SANITIZER_ERROR_EXIT),
                       # CuPy's own probing calls may return benign API errors; a
                       # failed launch of ours raises in the module and fails the run.
                       "--report-api-errors", "no", "--print-limit", "20", *child]
        timeout = min(SANITIZER_CAP_S.get(tool, 100), remaining - 10)
        log(f"sanitizer {tool}: {' '.join(command)}  (timeout {timeout:.0f} s)")
        start = time.time()
        try:
            done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})
            output, rc = done.stdout, done.returncode
        except subprocess.TimeoutExpired as error:
            out = error.stdout or ""
            output, rc = (out.decode(errors="replace") if isinstance(out, bytes) else out), None
        seconds = time.time() - start
        if rc is None:
            status = "timeout"
        elif rc == SANITIZER_ERROR_EXIT:
            status = "errors"
        elif f"{SMALL_MARKER} FAILED" in output:
            status = "failed"
        elif rc == EXIT_OK and f"{SMALL_MARKER} ok" in output:
            status = "clean" if not args.cpu_only else "ran-without-sanitizer"
        else:
            status = "unavailable"  # the tool or the device refused, or the program died: no verdict
        result = {"tool": tool, "status": status, "returncode": rc, "seconds": round(seconds, 1),
                  "summary": summary_lines(output), "output_tail": output[-4000:]}
        results.append(result)
        if os.environ.get("OUT") and not args.cpu_only:
            with open(os.path.join(os.environ["OUT"], f"sanitizer_{tool}.log"), "w") as f:
                f.write(output)
        log(f"sanitizer {tool}: {status} (rc {rc}, {seconds:.1f} s) {' | '.join(result['summary'])}")
        if status not in ("clean", "ran-without-sanitizer"):
            log("  ... " + "\n  ... ".join(output.strip().splitlines()[-15:]))
    return results


def sanitizer_verdict(results: list[dict]) -> str:
    statuses = {r["status"] for r in results}
    if statuses & {"errors", "failed"}:
        return "ERRORS (see above)"
    if not results:
        return "not run"
    if statuses <= {"clean"}:
        return "no errors"
    return "no verdict from " + ", ".join(f"{r['tool']} ({r['status']})" for r in results if r["status"] != "clean")


# ------------------------------------------------------------ bandwidth ----

def run_bandwidth(backend, names, sizes, reps: int, inner: int, deadline: float, rows: list[dict]) -> list[dict]:
    """Appends a row per (dtype, size, mode) to `rows` as it goes and returns it."""
    buffers = None
    for name in names:
        if hasattr(backend, "can_run") and not backend.can_run(name):
            log(f"bandwidth {name}: skipped (no CPU kernel for it without ml_dtypes)")
            continue
        if rows and time.time() > deadline - 60:
            log(f"bandwidth {name}: skipped, time budget nearly spent")
            continue
        if buffers is None:
            buffers = backend.alloc_bytes(max(sizes)), backend.alloc_bytes(max(sizes))
        for nbytes in sizes:
            count = nbytes // np.dtype(STORAGE[name]).itemsize
            src, dst = backend.view(buffers[0], name, count), backend.view(buffers[1], name, count)
            ops = backend.timed_ops(name, src, dst, count * np.dtype(STORAGE[name]).itemsize)
            order = list(ops)
            for op in order:  # warm-up: first launches, clocks up
                backend.time_ms(ops[op], inner)
            times = {op: [] for op in order}
            for rep in range(reps):
                rotation = order[rep % len(order):] + order[: rep % len(order)]  # interleaved
                for op in rotation:
                    times[op].append(backend.time_ms(ops[op], inner))
            median = {op: statistics.median(values) for op, values in times.items()}
            moved = 2 * nbytes  # read + write, for the kernel and the copy alike
            copy_gbps = moved / (median["copy"] * 1e-3) / 1e9
            for op, mode in (("kernel", "out_of_place"), ("kernel_in_place", "in_place")):
                gbps = moved / (median[op] * 1e-3) / 1e9
                applies = name in TARGET_DTYPES and nbytes >= TARGET_MIN_BYTES
                ratio = gbps / copy_gbps
                rows.append({
                    "dtype": name, "bytes": nbytes, "elements": count, "mode": mode,
                    "kernel_ms_median": median[op], "kernel_ms_min": min(times[op]),
                    "copy_ms_median": median["copy"], "copy_ms_min": min(times["copy"]),
                    "kernel_GBps": gbps, "copy_GBps": copy_gbps, "ratio": ratio,
                    "target_applies": applies, "meets_target": (ratio >= TARGET_RATIO) if applies else None,
                    "reps": reps, "inner": inner,
                })
            log(f"bandwidth {name} {human_bytes(nbytes)}: copy {copy_gbps:.0f} GB/s, kernel "
                f"{rows[-2]['kernel_GBps']:.0f} GB/s, in place {rows[-1]['kernel_GBps']:.0f} GB/s")
    return rows


def human_bytes(nbytes: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"


def parse_bytes(text: str) -> int:
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    factor = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    number = text[:-1] if text[-1:] in "KMG" else text
    try:
        value = int(float(number) * factor)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 256M, 1G)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"size must be positive: {text!r}")
    return value


def target_verdict(rows: list[dict]) -> dict:
    applicable = [r for r in rows if r["target_applies"]]
    if not applicable:
        return {"applies": False, "met": None,
                "text": f"target (>= {TARGET_RATIO:.2f} x copy at >= 256 MiB, float32/float16): not measured at such sizes"}
    worst = min(applicable, key=lambda r: r["ratio"])
    met = all(r["meets_target"] for r in applicable)
    return {"applies": True, "met": met, "min_ratio": worst["ratio"],
            "worst": {k: worst[k] for k in ("dtype", "bytes", "mode")},
            "text": (f"target kernel >= {TARGET_RATIO:.2f} x copy bandwidth at >= 256 MiB for float32 and float16: "
                     f"{'MET' if met else 'NOT MET'} (lowest ratio {worst['ratio']:.3f}: {worst['dtype']} "
                     f"{human_bytes(worst['bytes'])} {worst['mode']})")}


def bandwidth_table(rows: list[dict]) -> str:
    header = (f"{'dtype':9s} {'size':>8s} {'mode':13s} {'kernel ms':>10s} {'copy ms':>9s} "
              f"{'kernel GB/s':>11s} {'copy GB/s':>10s} {'ratio':>6s}  target")
    lines = [header, "-" * len(header)]
    for r in rows:
        target = ("yes" if r["meets_target"] else "NO") if r["target_applies"] else "-"
        lines.append(f"{r['dtype']:9s} {human_bytes(r['bytes']):>8s} {r['mode']:13s} "
                     f"{r['kernel_ms_median']:10.4f} {r['copy_ms_median']:9.4f} {r['kernel_GBps']:11.1f} "
                     f"{r['copy_GBps']:10.1f} {r['ratio']:6.3f}  {target}")
    return "\n".join(lines)


def correctness_table(records: list[dict]) -> str:
    groups: dict[tuple[str, str], list[int]] = {}
    for r in records:
        ok_total = groups.setdefault((r["dtype"], r["case"]), [0, 0])
        ok_total[0] += r["ok"]
        ok_total[1] += 1
    lines = [f"{'dtype':9s} {'case':32s} {'ok/total':>9s}"]
    for (name, case), (ok, total) in sorted(groups.items(), key=lambda kv: (DTYPES.index(kv[0][0]) if kv[0][0] in DTYPES else len(DTYPES), kv[0][1])):
        lines.append(f"{name:9s} {case:32s} {ok:>4d}/{total:<4d}{'' if ok == total else '  FAILED'}")
    return "\n".join(lines)


# ----------------------------------------------------------------- main ----

def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Correctness, compute-sanitizer and bandwidth check of the CUDA GradReverseGrad kernel "
                    "through the pybind11 module `_kernels`, without TensorFlow.")
    parser.add_argument("--build-dir", required=True,
                        help="CMake build directory holding the _kernels module (see scripts/gpu_check.sh)")
    parser.add_argument("--cpu-only", action="store_true",
                        help="no GPU: run every CPU-side part with the CPU kernel standing in for the device")
    parser.add_argument("--small", action="store_true",
                        help="small correctness cases only (what runs under compute-sanitizer)")
    parser.add_argument("--no-ml-dtypes", action="store_true",
                        help="behave as if ml_dtypes were absent (bfloat16 checked against numpy bit arithmetic)")
    parser.add_argument("--sizes", type=lambda s: [int(v) for v in s.split(",") if v], default=None,
                        help="correctness sizes in elements (default: 0,1,3,4097,16777219; --small: 0,1,3,4097)")
    parser.add_argument("--bandwidth-sizes", type=lambda s: [parse_bytes(v) for v in s.split(",") if v], default=None,
                        help="buffer sizes in bytes, e.g. 256M,1G (default; --cpu-only: 1M,8M)")
    parser.add_argument("--bandwidth-dtypes", type=lambda s: [v for v in s.split(",") if v], default=["float32", "float16", "bfloat16", "float64"],
                        help="dtypes to time, in order (default float32,float16,bfloat16,float64; later ones are "
                             "dropped if the time budget runs short)")
    parser.add_argument("--reps", type=int, default=None, help="timed repetitions per op (default 30; --cpu-only 5)")
    parser.add_argument("--inner", type=int, default=None, help="launches per timed repetition (default 5; --cpu-only 1)")
    parser.add_argument("--sanitizers", default="memcheck,racecheck",
                        help="compute-sanitizer tools to run on the small case, in order; empty for none")
    parser.add_argument("--time-budget", type=float, default=240.0,
                        help="seconds for the whole check, counted from GPU_CHECK_T0 (set by gpu_check.sh) when "
                             "given; optional steps are skipped to stay inside it")
    parser.add_argument("--json", default=None, help="where to write the JSON (default: $OUT/gpu_check.json when OUT is set)")
    args = parser.parse_args(argv)
    for name in args.bandwidth_dtypes:
        if name not in DTYPES:
            parser.error(f"unknown dtype {name!r} in --bandwidth-dtypes; accepted: {', '.join(DTYPES)}")
    if args.sizes is None:
        args.sizes = list(SMALL_SIZES if args.small else SIZES)
    if args.bandwidth_sizes is None:
        args.bandwidth_sizes = [1 << 20, 8 << 20] if args.cpu_only else [256 << 20, 1 << 30]
    if args.reps is None:
        args.reps = 5 if args.cpu_only else 30
    if args.inner is None:
        args.inner = 1 if args.cpu_only else 5
    if args.reps < 1 or args.inner < 1:
        parser.error("--reps and --inner must be at least 1")
    return args


def import_kernels(build_dir: str):
    build_dir = os.path.abspath(build_dir)
    sys.path.insert(0, build_dir)
    try:
        import _kernels
    except ImportError as error:
        raise SetupError(f"cannot import the kernel module `_kernels` from {build_dir}: {error} "
                         "(build it with scripts/gpu_check.sh, or cmake -DGRAD_REVERSE_KERNELS_ONLY=ON)") from error
    where = os.path.abspath(_kernels.__file__)
    if os.path.dirname(where) != build_dir:
        raise SetupError(f"imported `_kernels` from {where}, not from the build directory {build_dir}")
    return _kernels


def main(argv=None) -> int:
    args = parse_args(argv)
    started = float(os.environ.get("GPU_CHECK_T0", time.time()))
    deadline = started + args.time_budget
    use_ml_dtypes = not args.no_ml_dtypes
    report: dict = {"mode": "cpu-only" if args.cpu_only else "cuda", "small": args.small,
                    "python": sys.version.split()[0], "numpy": np.__version__,
                    "ml_dtypes": (ml_dtypes.__version__ if ml_dtypes is not None and use_ml_dtypes else None)}
    try:
        kernels = import_kernels(args.build_dir)
        report["kernels_module"] = kernels.__file__
        report["cuda_compiled_in"] = bool(kernels.cuda_compiled_in())
        backend = (HostBackend(kernels, use_ml_dtypes) if args.cpu_only
                   else CudaBackend(kernels, exact_allocations=args.small))
        report["device"] = backend.info()
    except SetupError as error:
        log(f"gpu_check: cannot run: {error}")
        return EXIT_SETUP
    log(f"gpu_check: {report['device']['name']}; module {report['kernels_module']}; "
        f"bfloat16 oracle: {'CPU kernel via ml_dtypes' if report['ml_dtypes'] else 'numpy bit arithmetic'}")

    lambdas = SMALL_LAMBDAS if args.small else LAMBDAS
    records: list[dict] = []
    try:
        run_correctness(backend, kernels, args.sizes, lambdas, use_ml_dtypes, records)
    except Exception as error:  # a launch error is a finding, not a setup problem
        log(f"gpu_check: correctness run raised {type(error).__name__}: {error}")
        records.append({"dtype": "-", "n": 0, "lambda": None, "case": "exception", "ok": False,
                        "mismatches": -1, "guards_ok": False, "error": f"{type(error).__name__}: {error}"})
    failures = [r for r in records if not r["ok"]]
    correct = not failures
    if args.small:
        # The parent reads this marker: an exit status alone cannot tell
        # failed checks from a sanitizer that could not run the program.
        log(f"{SMALL_MARKER} {'ok' if correct else 'FAILED'} ({len(records) - len(failures)}/{len(records)} checks ok)")
        return EXIT_OK if correct else EXIT_FAILED

    bandwidth: list[dict] = []
    bandwidth_error = None
    try:
        bandwidth = run_bandwidth(backend, args.bandwidth_dtypes, args.bandwidth_sizes, args.reps, args.inner,
                                  deadline, bandwidth)
    except Exception as error:  # e.g. a CUDA context broken by a failed check: still report the rest
        bandwidth_error = f"{type(error).__name__}: {error}"
        log(f"gpu_check: bandwidth measurement raised {bandwidth_error}")
    tools = [t for t in args.sanitizers.split(",") if t]
    sanitizers = run_sanitizers(args, tools, deadline)
    sanitizer_failed = [s for s in sanitizers if s["status"] in ("errors", "failed")]
    verdict = target_verdict(bandwidth)

    report.update({
        "ok": correct and not sanitizer_failed,
        "correctness": {"checks": len(records), "failed": len(failures), "failures": failures[:50], "records": records},
        "sanitizer": sanitizers,
        "bandwidth": bandwidth,
        "bandwidth_error": bandwidth_error,
        "target": verdict,
        "elapsed_s": round(time.time() - started, 1),
    })
    json_path = args.json or (os.path.join(os.environ["OUT"], "gpu_check.json") if os.environ.get("OUT") else None)
    if json_path:
        os.makedirs(os.path.dirname(os.path.abspath(json_path)), exist_ok=True)
        with open(json_path, "w") as f:
            json.dump(report, f, indent=1, default=str)

    log()
    log("== correctness (bitwise vs the CPU kernel; NaN matches NaN) ==")
    log(correctness_table(records))
    log()
    log("== compute-sanitizer on the small case ==")
    for s in sanitizers:
        log(f"{s['tool']:10s} {s['status']:22s} {' | '.join(s.get('summary', [])) or s.get('reason', '')}")
    if not sanitizers:
        log("(none run)")
    log()
    log(f"== bandwidth on {report['device']['name']}: bytes read + written, median of {args.reps} interleaved "
        f"reps x {args.inner} launches ==")
    log(bandwidth_table(bandwidth) if bandwidth else "(none measured)")
    if bandwidth_error:
        log(f"bandwidth measurement stopped early: {bandwidth_error}")
    log(verdict["text"])
    log()
    log(f"correctness: {'all ' + str(len(records)) + ' checks passed' if correct else f'{len(failures)} of {len(records)} checks FAILED'}; "
        f"sanitizer: {sanitizer_verdict(sanitizers)}; elapsed {report['elapsed_s']} s"
        + (f"; JSON: {json_path}" if json_path else ""))
    return EXIT_OK if report["ok"] else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
