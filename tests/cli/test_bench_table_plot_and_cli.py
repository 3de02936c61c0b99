"""The bench command's reading and writing: the --sizes syntax and size
labels, the table's layout and notes, the plot's limit region and labels,
progress lines and the command's arguments and output files. What the bench
measures (rounds, ratios, the memory-bandwidth limit, the kernel's own pass,
allocations) is in test_bench.py."""

import dataclasses
import json
import os
import re
import sys

import pytest

from grad_reverse import bench
from grad_reverse.__main__ import main
from grad_reverse.bench import cli, limit, settings, table
from grad_reverse.bench.measure import limit_from_times


@pytest.mark.parametrize(
    "text, sizes", [("1K", [1024]), ("16M,64M", [1 << 24, 1 << 26]), ("1000, 2k", [1000, 2048]), ("1G", [1 << 30])]
)
def test_sizes_are_read_as_the_table_writes_them(text, sizes):
    assert table.parse_sizes(text) == sizes
    assert [table.parse_size(table.size_label(n)) for n in sizes] == sizes


@pytest.mark.parametrize("text", ["", "0", "-1", "1.5M", "16MB", "M", "1K,", "abc"])
def test_bad_sizes_are_rejected_naming_the_accepted_forms(text):
    with pytest.raises(ValueError, match="size"):
        table.parse_sizes(text)


def test_size_labels():
    assert [table.size_label(n) for n in (1000, 1024, 1 << 16, 3 << 20, 1 << 30)] == ["1000", "1K", "64K", "3M", "1G"]


def test_table_has_a_section_per_lambda_the_variable_first():
    results = [
        bench.Result(
            "fwd+bwd", "eager", 1024, "float32", kind, {"native": [1e-4], "reference": [2e-4], "identity": [0.9e-4]}
        )
        for kind in ("float", "variable")
    ]
    text = table.format_table(results)
    assert text.index("lambda: a tf.Variable") < text.index("lambda: a Python float")
    assert text.count("ref/ native/") == 2 and text.count("native   floor") == 2  # a header per section


def table_results(size_bytes: int = 4) -> list:
    """Rows of every kind a run has: eager 1K (no GB/s), 1M (in a 32 MiB
    cache), 64M (a limit), chain, DANN step; long numbers, the widest dtype."""
    dtype = {2: "bfloat16", 4: "float32"}[size_bytes]
    rows = []
    for case, mode, size in [
        ("fwd+bwd", "eager", 1 << 10),
        ("fwd+bwd", "tf.function", 1 << 20),
        ("fwd+bwd", "xla", 1 << 26),
        ("chain", "tf.function", 1 << 24),
        ("dann step", "tf.function", 256),
    ]:
        floor = {"dann step": "no GRL", "chain": "identity"}.get(case, "identity+read")
        moved = 2 * size * size_bytes if case == "fwd+bwd" and size >= 1 << 20 else 0
        rows.append(
            bench.Result(
                case,
                mode,
                size,
                dtype if case != "dann step" else "float32",
                "variable",
                {"native": [0.123456], "reference": [0.654321], floor: [0.0999]},
                bytes_moved=moved,
                limit_gbps=57.3 if size == 1 << 26 else None,
            )
        )
    return rows


def test_table_rows_fit_the_width_with_a_header_a_reader_can_read(monkeypatch):
    monkeypatch.setattr(limit, "last_level_cache_bytes", lambda: 32 << 20)
    text = table.format_table(table_results(2))
    assert max(len(line) for line in text.splitlines()) <= table.WIDTH == 100, text
    top, bottom = next((a, b) for a, b in zip(text.splitlines(), text.splitlines()[1:]) if b.startswith("case "))
    # Each header cell read downwards: both lines cut where the lower line's words end.
    ends = [m.end() for m in re.finditer(r"\S+", bottom)]
    cells = [
        " ".join(line[start:end].strip() for line in (top, bottom)).strip() for start, end in zip([0, *ends], ends)
    ]
    assert cells == [
        "case",
        "mode",
        "size",
        "dtype",
        "native ms",
        "reference ms",
        "floor ms",
        "ref/ native",
        "native/ floor",
        "backward GB/s",
        "limit GB/s",
        "% of limit",
    ], cells
    row = next(line for line in text.splitlines() if line.startswith("fwd+bwd   xla"))
    assert row.split()[-3:] == ["2.2", "57.3", "4%"]  # 2 x 64M x 2 bytes over 0.123456 s, of 57.3 GB/s


def test_the_table_says_once_above_it_why_limit_columns_are_empty(monkeypatch):
    monkeypatch.setattr(limit, "last_level_cache_bytes", lambda: 32 << 20)
    text = table.format_table(table_results() + [dataclasses.replace(r, lambda_kind="float") for r in table_results()])
    notes = [line for line in text.split("\n\n")[0].split("\n") if "empty" in line]
    assert text.count("not bound by memory bandwidth") == 1 and text.count("32 MiB last-level cache") == 1
    assert text.index("memory limit applies") < text.index("lambda: a tf.Variable"), text
    assert notes and "under 1M, chain, dann step" in text.replace("\n", " ")
    # 1M float32: dy and dx of 4 MiB each, in a 32 MiB cache; 8M (32 MiB each) is the first that goes to memory.
    assert "limit empty at 1M:" in text.replace("\n", " ") and "from --sizes 8M on" in text.replace("\n", " ")
    monkeypatch.setattr(limit, "last_level_cache_bytes", lambda: 1 << 20)  # 1M float32 goes to memory
    measured = [dataclasses.replace(r, limit_gbps=50.0) for r in table_results() if r.bytes_moved]
    assert table.empty_limit_note(measured) is None
    assert "empty" not in table.format_table(measured)


def test_quick_plot_title_says_how_many_sizes():
    assert "3 sizes" in cli.plot_title("float32", True, cli.QUICK_SIZES)
    assert "sizes" not in cli.plot_title("float32", False, cli.FULL_SIZES)


def test_cli_writes_json_and_plot(tmp_path, capsys):
    assert (
        main(["bench", "--sizes", "256,1K", "--rounds", "2", "--no-memory", "--no-dann", "--out", str(tmp_path)]) == 0
    )
    printed = capsys.readouterr().out
    assert "ref/ native/" in printed and "chain" in printed and "native/(identity+read)" in printed
    # The short summary comes first, above the full table.
    assert printed.index("summary (ratios taken round by round") < printed.index("ref/ native/")
    payload = json.loads((tmp_path / "bench.json").read_text())
    rows = [r for r in payload["results"] if r["case"] == "fwd+bwd"]
    assert {r["size"] for r in rows} == {256, 1024}
    assert {r["lambda_kind"] for r in rows} == {"variable", "float"}
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("argv", [["--sizes", "1k2"], ["--sizes", "16MB"], ["--rounds", "0"], ["--lambda", "int"]])
def test_cli_rejects_bad_arguments(argv, capsys):
    with pytest.raises(SystemExit):
        main(["bench", *argv])
    assert "usage" in capsys.readouterr().err


def test_progress_is_one_line_per_case_when_not_a_terminal(capsys, monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    progress = cli.Progress(2)
    progress.start(0, "eager 1K")
    progress.start(1, "chain")
    progress.finish()
    assert capsys.readouterr().err.splitlines() == ["bench [1/2] eager 1K", "bench [2/2] chain"]


def test_verbose_flag_does_not_override_a_top_level_one():
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--verbose", action="store_true")
    bench.add_cli(parser.add_subparsers(dest="command"))
    assert parser.parse_args(["--verbose", "bench"]).verbose is True
    assert parser.parse_args(["bench", "--verbose"]).verbose is True
    assert parser.parse_args(["bench"]).verbose is False
    sizes = parser.parse_args(["bench", "--sizes", "16M,64M"]).sizes
    assert sizes == [1 << 24, 1 << 26]


def test_the_limit_and_kernel_sections_wrap_at_the_tables_width():
    from grad_reverse.bench import table

    ways = {
        f"{limit.LIMIT_PREFIX}{name}, 2 threads": [0.004, 0.005, 0.006]
        for name in ("numpy copy", "numpy in place", "kernel", "kernel in place", "tf.function multiply")
    }
    limits = {size: limit_from_times(size, ways) for size in (64 << 10, 4 << 20, 64 << 20)}
    kernel = limit.KernelBandwidth(1 << 20, 4 << 20, 1.0, 1.0, ways)
    text = table.format_limits(limits, 4) + "\n" + table.format_kernel_rows([kernel], "float32")
    assert max(len(line) for line in text.splitlines()) <= table.WIDTH, text
    assert "tf.function multiply" in text.replace("\n          ", " ")  # wrapped, not cut


def _plotted_panel(limit_sizes: tuple[int, ...]):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from grad_reverse.bench import plot

    rows = []
    for mode in ("eager", "tf.function", "xla"):
        for size in (1 << 10, 1 << 20, 1 << 24):
            seconds = size * 8 / 20e9 + 20e-6
            limited = size in limit_sizes and mode == "tf.function"
            rows.append(
                bench.Result(
                    "fwd+bwd",
                    mode,
                    size,
                    "float32",
                    "variable",
                    {"native": [seconds] * 3, "reference": [2 * seconds] * 3, "identity+read": [0.9 * seconds] * 3},
                    bytes_moved=size * 8,
                    limit_gbps=30.0 if limited else None,
                )
            )
    figure, ax = plt.subplots()
    plot._panel(ax, rows, "variable")
    labels = ax.get_legend_handles_labels()[1]
    texts = [text.get_text() for text in ax.texts]
    plt.close(figure)
    return labels, texts


def test_the_plot_draws_and_labels_the_limit_over_two_sizes_or_more():
    labels, texts = _plotted_panel((1 << 20, 1 << 24))
    assert any(label.startswith("out of reach") for label in labels) and texts == ["memory-bandwidth limit"]


def test_the_quick_plot_has_no_limit_label_or_legend_entry_when_it_draws_no_limit():
    # --quick: one size (16M) beyond the caches, where a region has no width.
    labels, texts = _plotted_panel((1 << 24,))
    assert not any(label.startswith("out of reach") for label in labels) and texts == []
    assert "native" in labels


def test_the_plot_draws_one_panel_per_kind_of_lambda_and_mode_each_with_its_three_lines(tmp_path, monkeypatch):
    # One panel per kind held twelve lines (three modes of three) at --quick, tangled on log axes.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from grad_reverse.bench import plot

    rows = [
        bench.Result(
            "fwd+bwd",
            mode,
            size,
            "float32",
            kind,
            {"native": [1e-3] * 3, "reference": [2e-3] * 3, "identity": [5e-4] * 3},
        )
        for kind in ("variable", "float")
        for mode in ("eager", "tf.function", "xla")
        for size in (1 << 10, 1 << 20)
    ]
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to look at it
    plot.plot(rows, tmp_path / "bench.png", "title")
    (figure,) = figures
    panels = [ax for ax in figure.axes if ax.lines]
    assert len(panels) == 6
    assert {ax.get_title().split(":")[0] for ax in panels} == {"eager", "tf.function", "tf.function(jit_compile=True)"}
    for ax in panels:
        assert ax.get_legend_handles_labels()[1] == ["native", "reference", "floor"], ax.get_title()


def test_without_out_the_command_writes_json_and_plot_to_the_default_folder_and_says_where(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--sizes", "256", "--rounds", "2", "--lambda", "float", "--no-memory", "--no-dann"]) == 0
    printed = capsys.readouterr().out
    folder = tmp_path / settings.DEFAULT_OUT
    assert (folder / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (folder / "bench.json").is_file()
    assert (
        f"wrote {os.path.join(settings.DEFAULT_OUT, 'bench.json')} and {os.path.join(settings.DEFAULT_OUT, 'bench.png')}"
        in printed
    )
