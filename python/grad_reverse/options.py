"""The package's runtime choices, in one place.

Five choices. Four take their default from an environment variable, read
when the choice is first needed (docs/building.md, docs/gpu.md); where
TensorFlow allows, a setter changes a choice in the running process (for
tests and benchmarks).

* library (`GRAD_REVERSE_LIBRARY`: `auto`, `release`, `stable`): which native
  op library `import grad_reverse` loads. Made once, when the package is
  imported: TensorFlow can neither unload an op library nor register the same
  ops twice, so this choice cannot switch after loading and has no setter.
  Set the variable before the first import (or start a new process).
* backward (`GRAD_REVERSE_BACKWARD`: `auto`, `native`, `stock`): which
  implementation GradReverse's registered gradient builds. `set_backward`
  switches it: gradients built after the call (a new trace, an eager tape)
  use the new choice; functions traced before keep the gradient they hold.
* CPU path (`GRAD_REVERSE_CPU_PATH`: `auto`, `portable`, `avx2`, `avx512`,
  `avx512bf16`): the vector instructions the loaded library's CPU kernels
  use, read by the library at its first CPU kernel run. `set_cpu_path`
  forces a path from the next kernel run on (`auto`: the variable's choice
  again); every path gives the same bits.
* streaming stores (`GRAD_REVERSE_STREAMING_STORES`: `auto`, `on`, `off`):
  whether the loaded library's CPU backward writes a large dx (16 MiB or
  more, out of place) with non-temporal stores. They win on some machines
  and lose on others (where a fresh dx is faulted in), and on one machine
  they can win at one size and lose at another, so `auto` times the
  process's first such passes of each size (in doublings from 16 MiB) both
  ways and keeps the faster for that size;
  `set_streaming_stores` forces a choice from the next kernel run on, and
  `streaming_stores()` says which is in use and why.
* XLA fallback (no variable; `auto` or `always`): inside a function XLA
  compiles, `auto` runs the pure-Python version only where the library has
  no XLA kernel for a JIT device (warning once), `always` runs it wherever
  XLA compiles (it compiles to the same HLO). `set_xla_fallback` switches it
  for calls traced after it.

Reading a choice imports nothing; only the setters reach the loaded library.
"""

from __future__ import annotations

import os
from typing import Mapping, Optional

LIBRARY_VARIABLE = "GRAD_REVERSE_LIBRARY"
BACKWARD_VARIABLE = "GRAD_REVERSE_BACKWARD"
CPU_PATH_VARIABLE = "GRAD_REVERSE_CPU_PATH"
STREAMING_STORES_VARIABLE = "GRAD_REVERSE_STREAMING_STORES"

AUTO = "auto"
RELEASE, STABLE = "release", "stable"
LIBRARY_MODES = (AUTO, RELEASE, STABLE)
NATIVE, STOCK = "native", "stock"
BACKWARD_MODES = (AUTO, NATIVE, STOCK)
ALWAYS = "always"
XLA_FALLBACK_MODES = (AUTO, ALWAYS)

_backward_override: Optional[str] = None
_xla_fallback = AUTO


def library_mode(environ: Mapping[str, str] = os.environ) -> Optional[str]:
    """GRAD_REVERSE_LIBRARY's value (None when unset); `_library_choice` checks it."""
    return environ.get(LIBRARY_VARIABLE)


def backward_mode(environ: Mapping[str, str] = os.environ) -> Optional[str]:
    """The backward asked for: `set_backward`'s mode, else GRAD_REVERSE_BACKWARD's
    value (None when neither is set: `auto`)."""
    return _backward_override if _backward_override is not None else environ.get(BACKWARD_VARIABLE)


def set_backward(mode: Optional[str]) -> None:
    """Builds GradReverse's gradient with `mode` (`auto`, `native`, `stock`)
    from now on; None returns to GRAD_REVERSE_BACKWARD's choice. Decides
    again as `import grad_reverse` does (and warns as it does, when there is
    something to fix); `grad_reverse.ops.BACKWARD` holds the result.

    Raises:
      ValueError: `mode` is not one of BACKWARD_MODES.
    """
    global _backward_override
    from grad_reverse import _backward as backward_choice, ops

    if mode is not None:
        mode = backward_choice.parse_mode(mode)
    previous, _backward_override = _backward_override, mode
    try:
        ops.use_backward()
    except Exception:
        _backward_override = previous
        raise


def cpu_path() -> str:
    """The CPU path the loaded op library runs (never `auto`)."""
    from grad_reverse import _library_calls

    return _library_calls.cpu_path()


def set_cpu_path(name: str) -> None:
    """Runs the loaded op library's CPU kernels on the path `name` from now on
    (`auto`: GRAD_REVERSE_CPU_PATH's choice again). The pybind11 module
    `grad_reverse._kernels` keeps its own choice (its `set_cpu_path`).

    Raises:
      ValueError: this build or this CPU has no such path; nothing changed.
    """
    from grad_reverse import _library_calls

    _library_calls.set_cpu_path(name)


STREAMING_STORES_MODES = (AUTO, "on", "off")


def streaming_stores() -> str:
    """Whether the loaded op library's large out-of-place CPU passes use
    streaming stores, and why: forced (GRAD_REVERSE_STREAMING_STORES or
    `set_streaming_stores`), or under `auto` what the measurement found (or
    that it has not run yet); `error: ...` for an invalid
    GRAD_REVERSE_STREAMING_STORES, with which the CPU backward fails."""
    from grad_reverse import _library_calls

    return _library_calls.streaming_stores()


def set_streaming_stores(mode: str) -> None:
    """Forces the loaded op library's streaming-store choice from the next
    kernel run on: `on`, `off`, or `auto` (GRAD_REVERSE_STREAMING_STORES's
    choice again; a finished measurement is kept). The pybind11 module
    `grad_reverse._kernels` keeps its own choice (its `set_streaming_stores`).

    Raises:
      ValueError: `mode` is not one of STREAMING_STORES_MODES; nothing changed.
    """
    from grad_reverse import _library_calls

    if mode not in STREAMING_STORES_MODES:
        raise ValueError(f"streaming stores {mode!r} is not one of {', '.join(STREAMING_STORES_MODES)}")
    _library_calls.set_streaming_stores(mode)


def xla_fallback() -> str:
    """`auto` (the default) or `always`: see the module's docstring."""
    return _xla_fallback


def set_xla_fallback(mode: str) -> None:
    """Chooses when `grad_reverse` runs its pure-Python version inside XLA.

    Raises:
      ValueError: `mode` is not one of XLA_FALLBACK_MODES.
    """
    global _xla_fallback
    if mode not in XLA_FALLBACK_MODES:
        raise ValueError(f"XLA fallback {mode!r} is not one of {', '.join(XLA_FALLBACK_MODES)}")
    _xla_fallback = mode
