"""Correctness: the oracle checked first (every 16-bit value through the CPU
kernel and numpy), then every dtype and size, out of place (aligned, at
element 1, one pointer misaligned, on a non-default stream) and in place,
compared bitwise with the CPU kernel, with sentinels around every output."""

from __future__ import annotations

import json
import time

import numpy as np

from gpu_check_lib.common import log
from gpu_check_lib.values import (
    DTYPES,
    STORAGE,
    bfloat16_bits_to_float32,
    bits,
    compare,
    cpu_kernel,
    describe,
    float32_to_bfloat16_bits,
    make_values,
    ml_dtypes,
    numpy_reference,
    sentinel,
)

SIZES = (0, 1, 3, 4097, (1 << 24) + 3)
SMALL_SIZES = (0, 1, 3, 4097)
LAMBDAS = (0.3, 0.0, 1.0, 6.0, 30.0, -1.0, 1e-3)
SMALL_LAMBDAS = (0.3, -1.0)
# Sizes from here up are checked with the first lambda only: the CPU
# reference is single-threaded and the run must stay short.
ALL_LAMBDAS_BELOW = 1 << 20
GUARD = 8  # sentinel elements after every output (and before it, see `lead`)
VECTOR_BYTES = 16  # the kernel's vector width: leads of 16 bytes keep alignment


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
                records.append(
                    _record(
                        name, x.size, lambda_, "cpu_kernel_vs_numpy_all_16_bit", compare(name, got, want), got, want
                    )
                )
        if ml_dtypes is not None and use_ml_dtypes:
            with np.errstate(all="ignore"):  # NaN and overflow are among the inputs on purpose
                f = bfloat16_bits_to_float32(every) * -np.float32(lambda_)
            mine = float32_to_bfloat16_bits(f)
            theirs = f.astype(ml_dtypes.bfloat16).view(np.uint16)
            records.append(
                _record(
                    "bfloat16",
                    every.size,
                    lambda_,
                    "bit_rounding_vs_ml_dtypes",
                    compare("bfloat16", mine, theirs),
                    mine,
                    theirs,
                )
            )
    return records


def _record(name, n, lambda_, case, result, got=None, want=None, guards_ok=True) -> dict:
    mismatches, first = result
    record = {
        "dtype": name,
        "n": int(n),
        "lambda": lambda_,
        "case": case,
        "ok": mismatches == 0 and guards_ok,
        "mismatches": mismatches,
        "guards_ok": guards_ok,
    }
    if mismatches and got is not None:
        record["first_mismatch"] = {
            "index": first,
            "got": describe(name, got, first),
            "want": describe(name, want, first),
        }
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
        records.append(
            _record(name, n, lambda_, "cpu_kernel_vs_numpy", compare(name, want, reference), want, reference)
        )
    if hasattr(backend, "can_run") and not backend.can_run(name):
        return records

    guard_value = sentinel(name)

    def guarded(lead: int, body: np.ndarray | None):
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
    for case, lead, body, expected in (
        ("in_place", aligned_lead, x[:n], want[:n]),
        ("in_place_offset1", 1, x[1:], want[1:]),
    ):
        buffer = guarded(lead, body)
        view = buffer[lead : lead + n]
        backend.neg_scale(name, view, view, lambda_)
        finish(case, buffer, lead, expected)
    unchanged = (
        compare(name, backend.download(in_aligned), x[:n])[0] == 0
        and compare(name, backend.download(in_full), x)[0] == 0
    )
    records.append(_record(name, n, lambda_, "inputs_unchanged", (0 if unchanged else 1, None)))
    return records


def run_correctness(backend, kernels, sizes, lambdas, use_ml_dtypes: bool, records: list[dict]) -> None:
    """Appends to `records` as it goes, so an exception keeps what ran before it."""
    records += reference_self_check(kernels, use_ml_dtypes)
    bad = [r for r in records if not r["ok"]]
    log(
        f"reference self-check (all 16-bit values, {len(LAMBDAS)} lambdas): {len(records) - len(bad)}/{len(records)} ok"
    )
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
                    raise RuntimeError(
                        f"while checking {name} n={n} lambda={lambda_}: {type(error).__name__}: {error}"
                    ) from error
            failed = [r for r in group if not r["ok"]]
            cases = sorted({r["case"] for r in group})
            log(
                f"  {name:8s} n={n:<9d} {len(these)} lambda(s) x {len(cases)} cases: "
                f"{'ok' if not failed else f'{len(failed)} FAILED'}  ({time.perf_counter() - start:.1f} s)"
            )
            for r in failed[:5]:
                log(f"    FAILED {json.dumps(r)}")
            records += group
