"""Warnings the package gives at import, pointed at the user's code.

A warning raised while `import grad_reverse` runs should name the line of the
user's program that imported the package, not a line inside the package, or
Python's `warnings` filters (and the user) cannot tell where it came from.
"""

from __future__ import annotations

import inspect
import os
import warnings

# grad_reverse/, this file's folder's parent.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def warn_at_user(message: str, category: type[Warning] = RuntimeWarning) -> None:
    """`warnings.warn(message, category)` attributed to the first frame outside grad_reverse."""
    warnings.warn(message, category, stacklevel=stacklevel_outside_package())


def stacklevel_outside_package() -> int:
    """The `stacklevel` for a warning raised by this function's caller that
    points at the first frame outside grad_reverse (the user's import).
    importlib's frames are skipped, as `warnings` itself does not count them."""
    frame = inspect.currentframe()
    frame = frame.f_back if frame is not None else None  # the caller, which warns: stacklevel 1
    level = 1
    while frame is not None:
        filename = frame.f_code.co_filename
        if "importlib" in filename and "_bootstrap" in filename:
            frame = frame.f_back
            continue
        if not os.path.abspath(filename).startswith(_PACKAGE_DIR):
            return level
        level += 1
        frame = frame.f_back
    return level
