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

The facade over the settings (`_native.settings`) and the loaded library
(`ops.LIBRARY`), for users and tools; nothing inside the package imports it.
Importing it and reading a setting import nothing else; `set_backward` and
the loaded library's choices import `grad_reverse.ops` (which loads the
library, as `import grad_reverse` does).
"""

from __future__ import annotations

import ctypes

from grad_reverse._native import calls, settings
from grad_reverse._native.settings import (
    ALWAYS,
    AUTO,
    BACKWARD_MODES,
    BACKWARD_VARIABLE,
    CPU_PATH_VARIABLE,
    LIBRARY_MODES,
    LIBRARY_VARIABLE,
    NATIVE,
    RELEASE,
    STABLE,
    STOCK,
    STREAMING_STORES_MODES,
    STREAMING_STORES_VARIABLE,
    XLA_FALLBACK_MODES,
    backward_mode,
    library_mode,
    set_xla_fallback,
    xla_fallback,
)

__all__ = [
    "ALWAYS",
    "AUTO",
    "BACKWARD_MODES",
    "BACKWARD_VARIABLE",
    "CPU_PATH_VARIABLE",
    "LIBRARY_MODES",
    "LIBRARY_VARIABLE",
    "NATIVE",
    "RELEASE",
    "STABLE",
    "STOCK",
    "STREAMING_STORES_MODES",
    "STREAMING_STORES_VARIABLE",
    "XLA_FALLBACK_MODES",
    "backward_mode",
    "cpu_path",
    "library_mode",
    "set_backward",
    "set_cpu_path",
    "set_streaming_stores",
    "set_xla_fallback",
    "streaming_stores",
    "xla_fallback",
]


def set_backward(mode: str | None) -> None:
    """Builds GradReverse's gradient with `mode` (`auto`, `native`, `stock`)
    from now on; None returns to GRAD_REVERSE_BACKWARD's choice. Decides
    again as `import grad_reverse` does (and warns as it does, when there is
    something to fix); `grad_reverse.ops.BACKWARD` holds the result.

    Args:
      mode: one of BACKWARD_MODES, or None.

    Raises:
      ValueError: `mode` is not one of BACKWARD_MODES.
    """
    from grad_reverse import ops

    previous = settings.override_backward(mode)
    try:
        ops.use_backward()
    except Exception:
        settings.restore_backward(previous)
        raise


def cpu_path() -> str:
    """The CPU path the loaded op library runs (never `auto`)."""
    return calls.cpu_path(_loaded_library())


def set_cpu_path(name: str) -> None:
    """Runs the loaded op library's CPU kernels on the path `name` from now on
    (`auto`: GRAD_REVERSE_CPU_PATH's choice again). The package's pybind11
    kernel module (for tests and benchmarks without TensorFlow) keeps its own choice.

    Args:
      name: a CPU path's name (`python -m grad_reverse info` lists them), or `auto`.

    Raises:
      ValueError: this build or this CPU has no such path; nothing changed.
    """
    calls.set_cpu_path(_loaded_library(), name)


def streaming_stores() -> str:
    """Whether the loaded op library's large out-of-place CPU passes use
    streaming stores, and why: forced (GRAD_REVERSE_STREAMING_STORES or
    `set_streaming_stores`), or under `auto` what the measurement found (or
    that it has not run yet); `error: ...` for an invalid
    GRAD_REVERSE_STREAMING_STORES, with which the CPU backward fails."""
    return calls.streaming_stores(_loaded_library())


def set_streaming_stores(mode: str) -> None:
    """Forces the loaded op library's streaming-store choice from the next
    kernel run on: `on`, `off`, or `auto` (GRAD_REVERSE_STREAMING_STORES's
    choice again; a finished measurement is kept). The package's pybind11
    kernel module (for tests and benchmarks without TensorFlow) keeps its own choice.

    Args:
      mode: one of STREAMING_STORES_MODES (`auto`, `on`, `off`).

    Raises:
      ValueError: `mode` is not one of STREAMING_STORES_MODES; nothing changed.
    """
    settings.check_streaming_stores_mode(mode)
    calls.set_streaming_stores(_loaded_library(), mode)


def _loaded_library() -> ctypes.CDLL:
    """The process's op library (`ops.LIBRARY`), for its ctypes calls."""
    from grad_reverse import ops

    return ops.LIBRARY.cdll
