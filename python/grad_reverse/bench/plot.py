"""bench.png: time per forward+backward against size, log-log, one panel per
kind of lambda and mode (eager, tf.function, XLA; rows and columns), so a
panel holds three lines (native, reference, the floor) and reads at a glance
(one panel per kind held twelve tangled lines at `--quick`). The
tf.function panels carry the memory-bandwidth limit, drawn as a hatched region
(times below it are out of reach) under a dotted red edge, not as another
data line; the axis spans the data, so the limit never stretches it. Where
the limit covers fewer than two sizes or lies below the axis, neither the
region nor its label is drawn. The sizes whose fresh dx is faulted in at
every call (`regime.page_fault_bound`) are shaded, and there the in-place
case (dy made in the graph) is drawn as well."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from grad_reverse.bench.measure import Result
from grad_reverse.bench.regime import PAGE_FAULT_BOUND_BYTES, page_fault_bound
from grad_reverse.bench.table import IN_PLACE, LAMBDA_TITLES

MODES = ("eager", "tf.function", "xla")
MODE_TITLES = {"eager": "eager", "tf.function": "tf.function", "xla": "tf.function(jit_compile=True)"}
COLORS = {"native": "tab:blue", "reference": "tab:orange", "floor": "tab:gray"}
FLOOR_NOTE = "floor: tf.identity, plus one read of the Variable in eager mode"


def _panel(ax, results: Sequence[Result], kind: str, mode: str = "tf.function") -> None:
    """One kind of lambda in one mode; the in-place case and the limit belong to tf.function's."""
    rows = [r for r in results if r.case == "fwd+bwd" and r.lambda_kind == kind]
    times: list[float] = []
    mode_rows = sorted((r for r in rows if r.mode == mode), key=lambda r: r.size)
    for impl, color in COLORS.items():
        if not mode_rows:
            break
        sizes = [r.size for r in mode_rows]
        medians = [r.median(r.floor if impl == "floor" else impl) for r in mode_rows]
        times += medians
        ax.plot(sizes, medians, "-", color=color, marker="o", markersize=3, label=impl)
    in_place = sorted((r for r in results if r.case == IN_PLACE and r.lambda_kind == kind), key=lambda r: r.size)
    in_place = in_place if mode == "tf.function" else []
    for impl in ("native", "reference") if in_place else ():
        medians = [r.median(impl) for r in in_place]
        times += medians
        ax.plot(
            [r.size for r in in_place],
            medians,
            "-.",
            color=COLORS[impl],
            marker="s",
            markersize=3,
            label=f"{impl} (tf.function, in place)",
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    if times:  # the axis spans the data; the limit region is clipped to it
        ax.set_ylim(min(times) / 1.5, max(times) * 1.5)
    _page_fault_zone(ax, rows)
    limit_rows = sorted((r for r in mode_rows if r.limit_gbps and mode == "tf.function"), key=lambda r: r.size)
    sizes = [r.size for r in limit_rows]
    floor_times = [r.bytes_moved / (r.limit_gbps * 1e9) for r in limit_rows]
    # A region needs two sizes (`--quick` has one beyond the caches) and must
    # reach into the axis; otherwise nothing would be drawn, so no label either.
    if len(limit_rows) >= 2 and max(floor_times) > ax.get_ylim()[0]:
        ax.fill_between(
            sizes,
            ax.get_ylim()[0],
            floor_times,
            facecolor="mistyrose",
            edgecolor="tab:red",
            hatch="///",
            linewidth=0,
            label="out of reach: faster than the measured\nmemory bandwidth allows the backward",
        )
        ax.plot(sizes, floor_times, color="tab:red", linewidth=2.5, linestyle=(0, (1, 1)))
        ax.annotate(
            "memory-bandwidth limit",
            (sizes[-1], floor_times[-1]),
            textcoords="offset points",
            xytext=(-4, 6),
            ha="right",
            fontsize=7,
            color="tab:red",
        )
    kind_title = LAMBDA_TITLES[kind].replace(" (what a schedule assigns; the default)", "")
    ax.set_title(f"{MODE_TITLES[mode]}: {kind_title}", fontsize=9)
    ax.set_xlabel("elements")
    ax.grid(True, which="both", alpha=0.3)


def _page_fault_zone(ax, rows: Sequence[Result]) -> None:
    """Shades the sizes from the first whose fresh dx is page-fault bound."""
    sizes = sorted({r.size for r in rows})
    bound = [s for s in sizes if any(page_fault_bound(s, r.dtype) for r in rows if r.size == s)]
    if not bound:
        return
    ax.axvspan(
        bound[0],
        sizes[-1] * 1.2,
        facecolor="lightyellow",
        edgecolor="goldenrod",
        alpha=0.6,
        zorder=0,
        label=f"page-fault bound (fresh dx >= {PAGE_FAULT_BOUND_BYTES >> 20} MiB)",
    )


def plot(results: Sequence[Result], path: Path, title: str) -> None:
    """Writes the figure to `path` (needs matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fwd_bwd = [r for r in results if r.case == "fwd+bwd"]
    kinds = [k for k in LAMBDA_TITLES if any(r.lambda_kind == k for r in fwd_bwd)] or ["variable"]
    modes = [m for m in MODES if any(r.mode == m for r in fwd_bwd)] or ["tf.function"]
    fig, axes = plt.subplots(len(kinds), len(modes), figsize=(4.5 * len(modes), 3.8 * len(kinds) + 1.6), squeeze=False)
    legend: dict = {}  # one entry per label over all panels, in the order drawn
    for row, kind in enumerate(kinds):
        for column, mode in enumerate(modes):
            ax = axes[row][column]
            _panel(ax, results, kind, mode)
            for handle, label in zip(*ax.get_legend_handles_labels()):
                legend.setdefault(label, handle)
        axes[row][0].set_ylabel("seconds per forward+backward\n(median)")
    fig.suptitle(f"{title}\n{FLOOR_NOTE}", fontsize=10)
    columns = 3
    lines = -(-len(legend) // columns)
    fig.legend(list(legend.values()), list(legend), loc="lower center", ncol=columns, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, (0.3 + 0.22 * lines) / (3.8 * len(kinds) + 1.6), 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
