"""The moons demo's picture: each network's decision regions over the source
and target points. Needs matplotlib (the `bench` extra)."""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from grad_reverse.demo.data import MoonsDomains
from grad_reverse.demo.models import predict_label

PLOT_NAME = "moons_decision_boundaries.png"

# Light fills for the regions a network assigns to each class, dark markers
# of the same hue for the points of that class.
_REGION_COLOURS = ("#9ecae1", "#fdd0a2")
_POINT_COLOURS = ("#08519c", "#a63603")


def plot_decision_boundaries(path: str, domains: MoonsDomains, panels: Sequence[tuple]) -> Optional[str]:
    """Writes `decision_boundary_figure(domains, panels)` to `path` as a PNG.

    Returns `path`, or None (with nothing written) when matplotlib is missing.
    """
    fig = decision_boundary_figure(domains, panels)
    if fig is None:
        return None
    fig.savefig(path, dpi=110)
    return path


def decision_boundary_figure(domains: MoonsDomains, panels: Sequence[tuple]) -> Optional["Figure"]:
    """One panel per `(title, model)`: the model's decision regions and
    boundary, the source and target points; one legend saying what each is.

    Returns a matplotlib `Figure`, or None when matplotlib is missing.
    """
    try:
        from matplotlib.colors import ListedColormap
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch
    except ImportError:
        return None
    # Figure without pyplot: renders with Agg and leaves the caller's
    # matplotlib backend alone.
    points = np.concatenate([domains.x_source, domains.x_target])
    low, high = points.min(axis=0) - 0.5, points.max(axis=0) + 0.5
    gx, gy = np.meshgrid(np.linspace(low[0], high[0], 250), np.linspace(low[1], high[1], 250))
    grid = np.stack([gx.ravel(), gy.ravel()], axis=1).astype(np.float32)
    fig = Figure(figsize=(6.0 * len(panels), 5.7))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    fig.subplots_adjust(left=0.07, right=0.98, top=0.9, bottom=0.2, wspace=0.18)
    for ax, (title, model) in zip(axes, panels):
        p = predict_label(model, grid).reshape(gx.shape)
        ax.contourf(gx, gy, p > 0.5, levels=[-0.5, 0.5, 1.5], cmap=ListedColormap(_REGION_COLOURS))
        ax.contour(gx, gy, p, levels=[0.5], colors="black", linewidths=1.5)
        for cls, colour in enumerate(_POINT_COLOURS):
            s = domains.y_source == cls
            t = domains.y_target == cls
            ax.scatter(*domains.x_source[s].T, s=14, c=colour, edgecolors="white", linewidths=0.3)
            ax.scatter(*domains.x_target[t].T, s=18, c=colour, marker="x", linewidths=0.9)
        ax.set_title(title)
        ax.set_xlabel("input x₁")
        ax.set_ylabel("input x₂")
        ax.set_aspect("equal")
        ax.set_xlim(low[0], high[0])
        ax.set_ylim(low[1], high[1])
    # One legend for all panels, below them (inside, it would cover points).
    legend = [
        Patch(facecolor=_REGION_COLOURS[0], label="shaded: where the network predicts class 0"),
        Patch(facecolor=_REGION_COLOURS[1], label="shaded: where the network predicts class 1"),
        Line2D([], [], color="black", linewidth=1.5, label="decision boundary, P(class 1) = 0.5"),
    ]
    for cls, colour in enumerate(_POINT_COLOURS):
        legend.append(Line2D([], [], linestyle="", marker="o", markersize=5, color=colour,
                             markeredgecolor="white", label=f"source point, class {cls} (labeled)"))
        legend.append(Line2D([], [], linestyle="", marker="x", markersize=6, color=colour,
                             label=f"target point, class {cls} (label unseen)"))
    fig.legend(handles=legend, loc="lower center", ncol=3, frameon=False, fontsize="small")
    fig.suptitle("Inter-twinning moons (Ganin et al. 2016, §5.1.1): target = source rotated 35°")
    return fig
