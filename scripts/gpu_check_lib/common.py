"""What every part of the check shares: exit statuses, the setup error, logging."""

from __future__ import annotations

EXIT_OK, EXIT_FAILED, EXIT_SETUP = 0, 1, 2


class SetupError(RuntimeError):
    """The check cannot run here (as opposed to: it ran and found a bug)."""


def log(message: str = "") -> None:
    print(message, flush=True)
