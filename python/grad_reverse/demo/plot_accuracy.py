"""The comparison's second picture: each method's target accuracy, one dot
per seed and a line at the mean, so that the spread over seeds shows beside
the difference of the means. Needs matplotlib (the `bench` extra)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # matplotlib is optional: imported where a figure is drawn
    from matplotlib.figure import Figure

import numpy as np

from grad_reverse.demo.problems import TITLES

ACCURACY_PLOT_NAME = "{problem}_target_accuracy.png"
# Labels as the table writes them would be cryptic on an axis.
METHOD_LABELS = {
    "plain": "plain",
    "dann": "DANN",
    "cdan": "CDAN",
    "cdan_e": "CDAN+E",
    "mdd": "MDD",
    "target_trained": "trained on target",
}


def plot_target_accuracy(path: str, result: dict) -> str | None:
    """Writes `target_accuracy_figure(result)` to `path` as a PNG; returns
    `path`, or None (nothing written) when matplotlib is missing."""
    fig = target_accuracy_figure(result)
    if fig is None:
        return None
    fig.savefig(path, dpi=110)
    return path


def target_accuracy_figure(result: dict) -> Figure | None:
    """`result`: `demo.method_runs.run`'s (`accuracy`: method -> one value per seed)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    accuracy = result["accuracy"]
    methods = list(accuracy)
    fig = Figure(figsize=(2.0 + 1.4 * len(methods), 4.8))
    ax = fig.subplots()
    fig.subplots_adjust(left=0.12, right=0.97, top=0.84, bottom=0.13)
    # Seeds spread sideways so that equal accuracies stay visible as separate dots.
    offsets = np.linspace(-0.15, 0.15, len(result["seeds"])) if len(result["seeds"]) > 1 else [0.0]
    for i, method in enumerate(methods):
        values = np.asarray(accuracy[method])
        ax.hlines(values.mean(), i - 0.3, i + 0.3, color="#08306b", linewidth=2.5)
        ax.scatter(i + np.asarray(offsets), values, s=22, color="#08306b", zorder=3)
        ax.annotate(
            f"mean {values.mean():.3f}",
            (i, values.max()),
            xytext=(0, 6),
            textcoords="offset points",
            ha="center",
            fontsize="small",
        )
    if "plain" in accuracy:
        baseline = float(np.mean(accuracy["plain"]))
        ax.axhline(
            baseline,
            color="#a63603",
            linestyle="--",
            linewidth=1,
            label=f"the plain network's mean, {baseline:.3f}: adaptation should beat it",
        )
        ax.legend(loc="lower right", fontsize="small", frameon=False)
    ax.set_xticks(range(len(methods)), [METHOD_LABELS.get(m, m) for m in methods])
    ax.set_ylabel("target accuracy")
    everything = np.concatenate([np.asarray(v) for v in accuracy.values()])
    # The axis spans the values, not 0 to 1, or a gap of 0.02 between
    # methods would not show (lines, not bars: nothing pretends to start at 0).
    ax.set_ylim(max(0.0, everything.min() - 0.1), min(1.0, everything.max()) + 0.04)
    seeds = result["seeds"]
    ax.set_title(
        f"Target accuracy over {len(seeds)} seed{'s' if len(seeds) > 1 else ''} "
        f"({', '.join(map(str, seeds))}), {result['steps']} steps: dots the seeds, lines the means",
        fontsize="medium",
    )
    fig.suptitle(TITLES.get(result["problem"], result["problem"]), fontsize="medium")
    return fig
