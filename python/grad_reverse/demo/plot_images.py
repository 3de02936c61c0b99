"""The image problem's first picture: one test image of each class in both
domains, the source's grey version above its photograph-blended target
version, so that the shift the methods must bridge is seen. Needs matplotlib
(the `bench` extra)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # matplotlib is optional: imported where a figure is drawn
    from matplotlib.figure import Figure

import numpy as np

from grad_reverse.demo.fashion_mnist import CLASSES


def plot_domain_samples(path: str, problem: Any, title: str = "") -> str | None:
    """Writes `domain_samples_figure(problem, title)` to `path` as a PNG; returns
    `path`, or None (nothing written) when matplotlib is missing."""
    fig = domain_samples_figure(problem, title)
    if fig is None:
        return None
    fig.savefig(path, dpi=110)
    return path


def sample_indices(labels: np.ndarray, classes: int) -> list:
    """The first test image of each class that occurs, in class order."""
    return [int(np.flatnonzero(labels == c)[0]) for c in range(classes) if np.any(labels == c)]


def domain_samples_figure(problem: Any, title: str = "") -> Figure | None:
    """`problem`: `demo.image_runs.ImageProblem` (its test images, as the networks see them,
    each stretched to the full range for display)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    chosen = sample_indices(problem.y_test, problem.classes)
    fig = Figure(figsize=(1.1 * max(len(chosen), 1) + 0.8, 3.2))
    axes = np.asarray(fig.subplots(2, max(len(chosen), 1), squeeze=False))
    rows = (("source", problem.x_test_source), ("target", problem.x_test_target))
    for row, (name, images) in enumerate(rows):
        for column, index in enumerate(chosen):
            ax = axes[row, column]
            image = images[index]
            ax.imshow((image - image.min()) / max(float(image.max() - image.min()), 1e-6))
            ax.set_xticks([])
            ax.set_yticks([])
            if row == 0:
                ax.set_title(CLASSES[problem.y_test[index]], fontsize="small")
            if column == 0:
                ax.set_ylabel(name)
    fig.suptitle(title, fontsize="medium")
    return fig
