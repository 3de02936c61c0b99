"""The demo's decision-boundary picture: each network's decision regions over
the source and target points. Needs matplotlib (the `bench` extra).

The moons demo draws its two networks side by side; `demo --methods` draws
one panel per method, three to a row, for two or three classes, and rings
the target points a network gets wrong."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # matplotlib is optional: imported where a figure is drawn
    from matplotlib.figure import Figure

import numpy as np

from grad_reverse.demo.models import class_scores
from grad_reverse.demo.problems import TITLES

PLOT_NAME = "moons_decision_boundaries.png"
PANELS_PER_ROW = 3

# Light fills for the regions a network assigns to each class, dark markers
# of the same hue for the points of that class.
_REGION_COLOURS = ("#9ecae1", "#fdd0a2", "#c7e9c0")
_POINT_COLOURS = ("#08519c", "#a63603", "#006d2c")
_MISSED_COLOUR = "#e7298a"  # a hue of no class: the rings must not read as a class


def plot_decision_boundaries(path: str, domains: Any, panels: Sequence[tuple], **options: Any) -> str | None:
    """Writes `decision_boundary_figure(domains, panels, **options)` to `path` as a PNG.

    Returns `path`, or None (with nothing written) when matplotlib is missing.
    """
    fig = decision_boundary_figure(domains, panels, **options)
    if fig is None:
        return None
    fig.savefig(path, dpi=110)
    return path


def decision_boundary_figure(
    domains: Any, panels: Sequence[tuple], title: str = TITLES["moons"], mark_misclassified: bool = False
) -> Figure | None:
    """One panel per `(title, model)`: the model's decision regions and
    boundaries, the source and target points; one legend saying what each is.

    `domains`: anything with `x_source`, `y_source`, `x_target`, `y_target`
    (the moons' `MoonsDomains`, a `demo.problems.Problem`), labels 0 .. K-1
    (two or three classes). `mark_misclassified` rings each target point
    whose predicted class is not its label.

    Returns a matplotlib `Figure`, or None when matplotlib is missing.
    """
    try:
        from matplotlib.colors import ListedColormap
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch
    except ImportError:
        return None
    y_source = np.asarray(domains.y_source).reshape(-1).astype(int)
    y_target = np.asarray(domains.y_target).reshape(-1).astype(int)
    classes = int(max(y_source.max(), y_target.max())) + 1
    points = np.concatenate([domains.x_source, domains.x_target])
    low, high = points.min(axis=0) - 0.5, points.max(axis=0) + 0.5
    gx, gy = np.meshgrid(np.linspace(low[0], high[0], 250), np.linspace(low[1], high[1], 250))
    grid = np.stack([gx.ravel(), gy.ravel()], axis=1).astype(np.float32)

    # Figure without pyplot: renders with Agg and leaves the caller's
    # matplotlib backend alone. One row keeps the moons demo's layout; more
    # rows add their height and keep the legend's and title's in inches.
    rows = math.ceil(len(panels) / PANELS_PER_ROW)
    columns = math.ceil(len(panels) / rows)  # four panels: two rows of two, not three and one
    # The legend (below the panels, three entries a row) gets 0.2 in per row beyond the moons' three.
    legend_rows = math.ceil((3 * classes + 1 + mark_misclassified) / 3)
    legend_height = 1.14 + 0.2 * (legend_rows - 3)
    height = 5.7 + 4.6 * (rows - 1) + (legend_height - 1.14)
    fig = Figure(figsize=(6.0 * columns, height))
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    fig.subplots_adjust(
        left=0.07, right=0.98, top=1 - 0.57 / height, bottom=legend_height / height, wspace=0.18, hspace=0.25
    )
    for ax in axes[len(panels) :]:
        ax.remove()
    region_map = ListedColormap(_REGION_COLOURS[:classes])
    for ax, (panel_title, model) in zip(axes, panels):
        scores = class_scores(model, grid)
        ax.contourf(gx, gy, scores.argmax(1).reshape(gx.shape), levels=np.arange(classes + 1) - 0.5, cmap=region_map)
        # A boundary is where a class's score meets the best of the others'
        # (for two classes: P(class 1) = 0.5); one class's lines suffice for two.
        for cls in [1] if classes == 2 else range(classes):
            margin = scores[:, cls] - np.delete(scores, cls, axis=1).max(axis=1)
            ax.contour(gx, gy, margin.reshape(gx.shape), levels=[0.0], colors="black", linewidths=1.5)
        for cls in range(classes):
            s, t = y_source == cls, y_target == cls
            colour = _POINT_COLOURS[cls]
            ax.scatter(*domains.x_source[s].T, s=14, c=colour, edgecolors="white", linewidths=0.3)
            ax.scatter(*domains.x_target[t].T, s=18, c=colour, marker="x", linewidths=0.9)
        if mark_misclassified:
            missed = class_scores(model, domains.x_target).argmax(1) != y_target
            ax.scatter(*domains.x_target[missed].T, s=70, facecolors="none", edgecolors=_MISSED_COLOUR, linewidths=1.2)
        ax.set_title(panel_title)
        ax.set_xlabel("input x₁")
        ax.set_ylabel("input x₂")
        ax.set_aspect("equal")
        ax.set_xlim(low[0], high[0])
        ax.set_ylim(low[1], high[1])
    # One legend for all panels, below them (inside, it would cover points).
    legend = [
        Patch(facecolor=_REGION_COLOURS[cls], label=f"shaded: where the network predicts class {cls}")
        for cls in range(classes)
    ]
    boundary = "P(class 1) = 0.5" if classes == 2 else "where the predicted class changes"
    legend.append(Line2D([], [], color="black", linewidth=1.5, label=f"decision boundary, {boundary}"))
    for cls in range(classes):
        colour = _POINT_COLOURS[cls]
        legend.append(
            Line2D(
                [],
                [],
                linestyle="",
                marker="o",
                markersize=5,
                color=colour,
                markeredgecolor="white",
                label=f"source point, class {cls} (labeled)",
            )
        )
        legend.append(
            Line2D(
                [],
                [],
                linestyle="",
                marker="x",
                markersize=6,
                color=colour,
                label=f"target point, class {cls} (label unseen)",
            )
        )
    if mark_misclassified:
        legend.append(
            Line2D(
                [],
                [],
                linestyle="",
                marker="o",
                markersize=9,
                markerfacecolor="none",
                markeredgecolor=_MISSED_COLOUR,
                label="ringed: target point the network gets wrong",
            )
        )
    fig.legend(handles=legend, loc="lower center", ncol=3, frameon=False, fontsize="small")
    # 0.114 in from the top: matplotlib's 0.98 on one row, clear of the panels' titles on more.
    fig.suptitle(title, y=1 - 0.114 / height)
    return fig
