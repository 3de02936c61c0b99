"""Training progress for a terminal and for logs.

On a terminal, Keras' progress bar redraws one line in place. Written to a
file or a pipe, the same bar leaves every redraw in the output: one line of
tens of thousands of characters for a 3000-step run. So when the output is
not a terminal, `LineProgress` prints short lines instead: one when a run
ends, and one every few seconds while a long run lasts.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from grad_reverse._keras import keras

# Often enough to show a run is alive in a CI log, rarely enough to stay short.
LINE_EVERY_SECONDS = 10.0


def is_terminal(stream: TextIO) -> bool:
    """Whether `stream` is an interactive terminal (False for files, pipes, and captured output)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def format_logs(logs: dict[str, Any] | None) -> str:
    """`loss 0.123, label_accuracy 1.000`: Keras' logs, 3 decimals, in Keras' order."""
    parts = []
    for name, value in (logs or {}).items():
        try:
            parts.append(f"{name} {float(value):.3f}")
        except (TypeError, ValueError):  # not a number: leave it out
            continue
    return ", ".join(parts)


class LineProgress(keras.callbacks.Callback):
    """Prints `label: step N/TOTAL, T s; Keras logs: <logs>` when training
    ends, and every `every_seconds` while it runs. For output that is not a
    terminal. Keras' loss and metrics in the logs are means over the run so
    far (as in its progress bar), not the last step's."""

    def __init__(
        self,
        label: str,
        total_steps: int,
        every_seconds: float = LINE_EVERY_SECONDS,
        print_fn: Callable[[str], None] = print,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        super().__init__()
        self.label = label
        self.total_steps = total_steps
        self.every_seconds = every_seconds
        self._print = print_fn
        self._clock = clock
        self._steps = 0
        self._start = self._last_line = 0.0

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._steps = 0
        self._start = self._last_line = self._clock()

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._steps += 1
        now = self._clock()
        if now - self._last_line >= self.every_seconds and self._steps < self.total_steps:
            self._last_line = now
            self._line(now, logs)

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        self._line(self._clock(), logs)

    def _line(self, now: float, logs: dict[str, Any] | None) -> None:
        values = format_logs(logs)
        self._print(
            f"  {self.label}: step {self._steps}/{self.total_steps}, {now - self._start:.1f} s"
            + (f"; Keras logs: {values}" if values else "")
        )


def fit_progress(label: str, total_steps: int, quiet: bool, stream: TextIO | None = None) -> tuple[int, list]:
    """`(verbose, callbacks)` for one `fit`: nothing when `quiet`; Keras' bar
    on a terminal; `LineProgress` lines otherwise. `stream`: sys.stdout."""
    if quiet:
        return 0, []
    if is_terminal(sys.stdout if stream is None else stream):
        return 1, []
    return 0, [LineProgress(label, total_steps, print_fn=lambda line: print(line, flush=True))]
