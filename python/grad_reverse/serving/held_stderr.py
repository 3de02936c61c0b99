"""Holding back what TensorFlow's C++ code writes to stderr, so that a
serving command can report a problem in one line of its own.

TensorFlow logs to file descriptor 2 directly (and its Python side logs some
tracebacks there too), below `sys.stderr`, so only swapping the descriptor
catches them.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator


class HeldBack:
    """What was held back; written out at the end unless `drop()` was called."""

    def __init__(self) -> None:
        self.keep = True

    def drop(self) -> None:
        self.keep = False


@contextlib.contextmanager
def stderr_held_back(keep: bool = True) -> Iterator[HeldBack]:
    """Redirects file descriptor 2 into a temporary file while the context
    lasts; afterwards writes what it caught to `sys.stderr`, unless `keep`
    is False or `drop()` was called (the caller summarises it instead)."""
    sys.stderr.flush()
    saved = os.dup(2)
    held = HeldBack()
    held.keep = keep
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield held
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if held.keep:
                capture.seek(0)
                sys.stderr.write(capture.read().decode(errors="replace"))
