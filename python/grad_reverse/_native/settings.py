"""The runtime choices' names, modes, parsers and in-process overrides.

The bottom layer of the package's runtime: it imports nothing of the
package (nor TensorFlow), so every other module may read it. What each
choice means: `grad_reverse.options`, the users' facade over this module
and the loaded library.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

LIBRARY_VARIABLE = "GRAD_REVERSE_LIBRARY"
"""The environment variable that chooses which op library loads: one of `LIBRARY_MODES`."""
BACKWARD_VARIABLE = "GRAD_REVERSE_BACKWARD"
"""The environment variable that chooses the backward's kernel: one of `BACKWARD_MODES`."""
CPU_PATH_VARIABLE = "GRAD_REVERSE_CPU_PATH"
"""The environment variable that forces one of the CPU kernels' code paths (`options.cpu_path()` says which runs)."""
STREAMING_STORES_VARIABLE = "GRAD_REVERSE_STREAMING_STORES"
"""The environment variable for the CPU kernels' streaming stores: one of `STREAMING_STORES_MODES`."""

AUTO = "auto"
"""The mode every choice starts in: the package decides from the build and the machine."""
RELEASE, STABLE = "release", "stable"
LIBRARY_MODES = (AUTO, RELEASE, STABLE)
"""`LIBRARY_VARIABLE`'s values: auto, the running release's own library, or the stable-ABI one."""
NATIVE, STOCK = "native", "stock"
BACKWARD_MODES = (AUTO, NATIVE, STOCK)
"""`BACKWARD_VARIABLE`'s values: auto, the native backward kernel, or TensorFlow's stock ops."""
ALWAYS = "always"
"""`XLA_FALLBACK_MODES`' forcing value: the pure-Python version inside XLA even where a kernel exists."""
XLA_FALLBACK_MODES = (AUTO, ALWAYS)
"""The values of `options.set_xla_fallback`: auto, or always the pure-Python version inside XLA."""
STREAMING_STORES_MODES = (AUTO, "on", "off")
"""`STREAMING_STORES_VARIABLE`'s values: auto (the faster way, timed per size), on, or off."""

# Set in the running process (`options.set_backward`, `options.set_xla_fallback`).
_backward_override: str | None = None
_xla_fallback = AUTO


def library_mode(environ: Mapping[str, str] = os.environ) -> str | None:
    """GRAD_REVERSE_LIBRARY's value (None when unset); `parse_library_mode` checks it.

    Args:
      environ: the environment to read (default: the process's).
    """
    return environ.get(LIBRARY_VARIABLE)


def parse_library_mode(value: str | None) -> str:
    """The mode a value of GRAD_REVERSE_LIBRARY names (unset or empty: auto).

    Raises:
      ImportError: `value` is not one of LIBRARY_MODES (read at import).
    """
    mode = (value or AUTO).strip().lower()
    if mode not in LIBRARY_MODES:
        raise ImportError(
            f"grad_reverse: {LIBRARY_VARIABLE}={value!r} is not a valid value; accepted values: "
            f"{AUTO} (the default: this TensorFlow's own library where the installation holds "
            f"one, else the stable-ABI library), {RELEASE}, {STABLE}."
        )
    return mode


def backward_mode(environ: Mapping[str, str] = os.environ) -> str | None:
    """The backward asked for: the in-process override, else GRAD_REVERSE_BACKWARD's
    value (None when neither is set: `auto`).

    Args:
      environ: the environment to read (default: the process's).
    """
    return _backward_override if _backward_override is not None else environ.get(BACKWARD_VARIABLE)


def parse_backward_mode(value: str | None) -> str:
    """The mode a value of GRAD_REVERSE_BACKWARD names (unset or empty: auto).

    Raises:
      ValueError: `value` is not one of BACKWARD_MODES.
    """
    mode = (value or AUTO).strip().lower()
    if mode not in BACKWARD_MODES:
        raise ValueError(
            f"{BACKWARD_VARIABLE}={value!r} is not a valid value; accepted values: {AUTO} (the default), "
            f"{NATIVE}, {STOCK}."
        )
    return mode


def override_backward(mode: str | None) -> str | None:
    """Sets the in-process backward mode (None: the variable's again), checked
    and normalised; returns the previous override.

    Raises:
      ValueError: `mode` is not one of BACKWARD_MODES.
    """
    global _backward_override
    previous = _backward_override
    _backward_override = None if mode is None else parse_backward_mode(mode)
    return previous


def restore_backward(previous: str | None) -> None:
    """Puts back an override `override_backward` returned."""
    global _backward_override
    _backward_override = previous


def xla_fallback() -> str:
    """`auto` (the default) or `always`: see `grad_reverse.options`."""
    return _xla_fallback


def set_xla_fallback(mode: str) -> None:
    """Chooses when `grad_reverse` runs its pure-Python version inside XLA.

    Args:
      mode: one of XLA_FALLBACK_MODES.

    Raises:
      ValueError: `mode` is not one of XLA_FALLBACK_MODES.
    """
    global _xla_fallback
    if mode not in XLA_FALLBACK_MODES:
        raise ValueError(f"XLA fallback {mode!r} is not one of {', '.join(XLA_FALLBACK_MODES)}")
    _xla_fallback = mode


def check_streaming_stores_mode(mode: str) -> str:
    """`mode` if it is one of STREAMING_STORES_MODES.

    Raises:
      ValueError: it is not.
    """
    if mode not in STREAMING_STORES_MODES:
        raise ValueError(f"streaming stores {mode!r} is not one of {', '.join(STREAMING_STORES_MODES)}")
    return mode
