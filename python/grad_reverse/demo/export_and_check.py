"""The demo's last step: export a trained model for serving and check the
export holds stock TensorFlow ops only (both demo paths share it)."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from typing import Any


def export_and_check(model: Any, path: str, quiet: bool, say: Callable[..., None]) -> int:
    """`export_serving(model, path)`, then `check_serving` on it; returns the check's exit code.

    `say` prints the report lines (a no-op when `quiet`). Quiet, the check's
    report is kept and shown, on stderr, only if it fails.
    """
    # Imported here: only this step needs the serving tools.
    from grad_reverse.serving import check_serving, export_serving

    # export_serving: Keras' model.export, then make_servable (which would
    # replace any GradReverse op by Identity). The models' call is the label
    # path, so the export holds the feature extractor and label head only.
    export_serving(model, path, check=False)
    say("\nServing check of the export:")
    report = io.StringIO() if quiet else None
    serving_check = int(check_serving(path, out=report))
    if report is not None and serving_check != 0:
        print(report.getvalue(), end="", file=sys.stderr)
    return serving_check
