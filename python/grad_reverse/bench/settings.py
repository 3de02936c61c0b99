"""The bench's settings that need no TensorFlow: the dtypes and lambda kinds it
times, its output folder, and sizes as it writes and reads them ("1K", "16M"),
so that the command line checks its arguments before TensorFlow loads."""

from __future__ import annotations

import re

# The op's dtypes (grad_reverse.SUPPORTED_DTYPES, which needs TensorFlow; a test compares them).
DTYPES = ("float16", "bfloat16", "float32", "float64")
LAMBDA_KINDS = ("variable", "float")
DEFAULT_OUT = "grad_reverse_bench"
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_SIZE = re.compile(r"(\d+)([KMG]?)", re.IGNORECASE)
SIZES_HELP = "comma-separated element counts: 1024, 1K, 16M (K = 1024, M = 1024^2, G = 1024^3)"


def size_label(n: int) -> str:
    """1024 -> "1K", 16777216 -> "16M"; a count with no such unit stays a number."""
    for unit in ("G", "M", "K"):
        scale = _UNITS[unit]
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def parse_size(text: str) -> int:
    """ "16M" -> 16777216, "1K" -> 1024, "1000" -> 1000 (what `size_label` writes, and counts)."""
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise ValueError(f"{text.strip()!r} is not a size: use {SIZES_HELP}")
    size = int(match.group(1)) * _UNITS[match.group(2).upper()]
    if size < 1:
        raise ValueError(f"sizes must be at least 1 element, got {text.strip()!r}")
    return size


def parse_sizes(text: str) -> list[int]:
    """ "1K,16M" -> [1024, 16777216]."""
    return [parse_size(part) for part in text.split(",")]
