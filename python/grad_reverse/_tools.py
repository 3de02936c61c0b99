"""The one internal module for the project's own tools: tests, experiments/
and scripts/ (docs/development.md). Not public API: it changes with the
package, without notice.

Tools use public names where there are some (`grad_reverse.options`,
`grad_reverse.ops.LIBRARY`, `grad_reverse.ops.BACKWARD`); this module holds
what they need beyond those. Importing it loads the package's op library.
"""

from __future__ import annotations

from pathlib import Path

from grad_reverse import ops
from grad_reverse._keras import KERAS_3, keras
from grad_reverse._native import calls

__all__ = ["KERAS_3", "keras", "library_path", "streaming_store_passes", "streaming_stores_at"]


def library_path() -> Path:
    """The op library file this process loaded."""
    return ops.LIBRARY.path


def streaming_stores_at(output_bytes: int) -> bool | None:
    """Whether an out-of-place CPU pass writing `output_bytes` bytes uses
    streaming stores now; None while `auto` is still measuring that size."""
    return calls.streaming_stores_at(ops.LIBRARY.cdll, output_bytes)


def streaming_store_passes() -> int:
    """How many of the loaded library's passes have written with streaming
    stores so far (-1: a library older than this count)."""
    return calls.streaming_store_passes(ops.LIBRARY.cdll)
