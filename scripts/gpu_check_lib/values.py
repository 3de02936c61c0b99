"""Values and references: the test values per dtype (bfloat16 held as its raw
16 bits), the numpy reference of -lambda * x, the CPU kernel as the oracle,
and the bitwise comparison (any NaN matches any NaN)."""

from __future__ import annotations

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
        return np.array(
            [0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x7F7F, 0xFF7F, 0x0080, 0x0001, 0x8001, 0x3F80, 0xBF80], np.uint16
        )
    fi = np.finfo(STORAGE[name])
    return np.array(
        [
            0.0,
            -0.0,
            np.inf,
            -np.inf,
            np.nan,
            fi.max,
            -fi.max,
            fi.tiny,
            fi.smallest_subnormal,
            -fi.smallest_subnormal,
            1.0,
            -1.0,
        ],
        STORAGE[name],
    )


def make_values(name: str, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` values in storage type: random (scale 100, so x30 overflows no
    half), with the special values at both ends when there is room (the ends
    are what the head and tail code paths see)."""
    x = to_storage(name, rng.standard_normal(count) * 100.0)
    specials = special_values(name)
    if count >= 4 * len(specials):
        x[: len(specials)] = specials
        x[-len(specials) :] = specials[::-1]
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


def cpu_kernel(kernels, name: str, x: np.ndarray, lambda_: float, use_ml_dtypes: bool) -> np.ndarray | None:
    """The CPU kernel's answer in storage type, or None where it cannot be called."""
    view = host_view_dtype(name, use_ml_dtypes)
    if view is None:
        return None
    out = kernels.neg_scale_cpu(np.ascontiguousarray(x).view(view), lambda_)
    return np.asarray(out).view(STORAGE[name])


def compare(name: str, got: np.ndarray, want: np.ndarray) -> tuple[int, int | None]:
    """(mismatches, first mismatching index): bitwise, except that a NaN
    matches a NaN of any payload (the CPU keeps payloads, the GPU may not)."""
    if got.shape != want.shape:
        return max(got.size, want.size, 1), 0
    bad = bits(got) != bits(want)
    if bad.any():
        bad &= ~(is_nan(name, got) & is_nan(name, want))
    count = int(np.count_nonzero(bad))
    return count, (int(np.argmax(bad)) if count else None)


def describe(name: str, a: np.ndarray, index: int | None):
    if index is None or index >= a.size:
        return None
    value = float(bfloat16_bits_to_float32(a[index : index + 1])[0]) if name == "bfloat16" else float(a[index])
    return {"bits": hex(int(bits(a[index : index + 1])[0])), "value": repr(value)}
