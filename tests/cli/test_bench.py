"""The benchmark's measurement code, on tiny sizes (timings themselves are
not asserted: this machine is noisy)."""

import dataclasses
import json
import math
import os
import re
import statistics
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from grad_reverse import bench
from grad_reverse.__main__ import main
from grad_reverse.bench import allocations, cli, limit, table
from grad_reverse.bench.measure import limit_from_times, paired_ratio


@pytest.fixture
def small_cache(monkeypatch):
    """A 1 MiB last-level cache: the tiny sizes the tests use then go to
    "memory", so that a limit applies to them."""
    monkeypatch.setattr(limit, "last_level_cache_bytes", lambda: 1 << 20)


def test_interleaved_times_every_callable_each_round():
    calls = {"fast": lambda: None, "slow": lambda: time.sleep(0.002)}
    times = bench.interleaved(calls, rounds=4, per_round=2)
    assert set(times) == {"fast", "slow"} and all(len(v) == 4 for v in times.values())
    assert min(times["slow"]) >= 0.002 > max(times["fast"])


def test_ratios_are_taken_round_by_round_and_bandwidth_from_the_median():
    result = bench.Result("fwd+bwd", "tf.function", 1000, "float32", "variable",
                          {"native": [1.0, 2.0, 9.0], "reference": [2.0, 4.0, 18.0], "identity": [1.0, 1.0, 3.0]},
                          bytes_moved=8000, limit_gbps=8000 / 1.0 / 1e9)
    assert result.ratio() == 2.0
    assert result.floor == "identity" and result.over_floor() == 2.0
    assert result.native_gbps() == pytest.approx(8000 / 2.0 / 1e9)
    assert result.fraction_of_limit() == pytest.approx(0.5)
    summary = result.summary()
    assert summary["min_s"]["native"] == 1.0 and summary["ratio_reference_over_native"] == 2.0
    assert paired_ratio([5.0, 1.0, 1.0], [1.0, 1.0, 1.0]) == 1.0  # one slow round does not move the median


def test_floor_is_identity_plus_read_when_measured():
    result = bench.Result("fwd+bwd", "eager", 8, "float32", "variable",
                          {"native": [1.0], "reference": [2.0], "identity": [0.5], "identity+read": [0.8]})
    assert result.floor == "identity+read"
    assert bench.Result("dann step", "tf.function", 8, "float32", "float", {"no GRL": [1.0]}).floor == "no GRL"


@pytest.mark.parametrize("kind", bench.LAMBDA_KINDS)
def test_cases_run_each_implementation_on_tiny_tensors(kind):
    for result in (bench.case_eager(64, tf.float16, 2, kind), bench.case_function(64, tf.float32, 2, False, kind),
                   bench.case_function(64, tf.bfloat16, 2, True, kind), bench.case_chain(64, tf.float32, 2, kind)):
        expected = set(bench.IMPLEMENTATIONS)
        if result.mode == "eager" and kind == "variable":
            expected.add("identity+read")  # the eager floor for a Variable lambda
        assert set(result.times) == expected and result.lambda_kind == kind
        assert all(len(v) == 2 and min(v) > 0 for v in result.times.values())


def test_the_variable_lambda_is_what_a_schedule_assigns():
    variable = bench.cases.make_lambda("variable")
    assert isinstance(variable, tf.Variable) and not variable.trainable and variable.dtype == tf.float32
    assert bench.cases.make_lambda("float") == 0.5
    with pytest.raises(ValueError, match="variable, float"):
        bench.cases.make_lambda("int")


@pytest.mark.parametrize("kind", bench.LAMBDA_KINDS)
def test_dann_step_case_compares_against_no_layer(kind):
    result = bench.case_dann_step(8, 16, 2, kind)
    assert set(result.times) == {"native", "reference", "no GRL"} and result.floor == "no GRL"


def test_threaded_copy_and_in_place_pass_touch_every_byte():
    src = np.arange(1000, dtype=np.uint8)
    dst = np.zeros_like(src)
    for threads in (1, 2, 3):
        dst[:] = 0
        copy = limit.threaded_copy(src, dst, threads)
        copy()
        copy.close()
        np.testing.assert_array_equal(dst, src)
    buffer = np.ones(256, np.float32).view(np.uint8)
    negate = limit.threaded_negate(buffer, 3)
    negate()
    negate.close()
    np.testing.assert_array_equal(buffer.view(np.float32), -np.ones(256, np.float32))


def test_slices_cover_the_bytes_once_on_cache_line_boundaries():
    for nbytes, parts in ((1, 4), (100, 2), (4096, 3), (1 << 20, 16)):
        slices = limit._slices(nbytes, parts)
        assert slices[0].start == 0 and slices[-1].stop == nbytes and len(slices) <= parts
        assert all(a.stop == b.start and b.start % 64 == 0 for a, b in zip(slices, slices[1:]))


def test_limit_is_the_best_of_several_ways_on_tiny_buffers():
    measured = bench.measure_limit(1 << 12, 3)
    # The fastest pass of all: at least as fast as any way's own fastest.
    assert measured.gbps > 0 and measured.gbps == max(measured.methods.values())
    assert measured.method in measured.methods and len(measured.methods) >= 3 and measured.rounds == 3
    assert any("threads" in name for name in measured.methods) or limit.usable_cores() == 1
    assert limit.thread_counts(16) == [1, 8, 16] and limit.thread_counts(1) == [1]


def test_the_limit_is_the_fastest_pass_of_any_way_in_any_round():
    times = {"a": [1.0, 3.0, 1.5, 9.0, 3.0], "b": [2.0, 0.8, 2.0, 8.0, 4.0]}
    measured = limit_from_times(1000, times)
    assert measured.gbps == pytest.approx(2 * 1000 / 0.8 / 1e9)
    assert measured.method == "b" and measured.rounds == 5
    assert measured.methods == {"a": pytest.approx(2000 / 1.0 / 1e9), "b": pytest.approx(2000 / 0.8 / 1e9)}
    assert measured.medians == {"a": pytest.approx(2000 / 3.0 / 1e9), "b": pytest.approx(2000 / 2.0 / 1e9)}


def _case_with_limit(native: list[float], **ways: list[float]) -> bench.Result:
    rounds = len(native)
    result = bench.Result("fwd+bwd", "tf.function", 1 << 20, "float32", "variable",
                          {"native": native, "reference": [2 * t for t in native], "identity": [0.001] * rounds,
                           **{"limit: " + name: samples for name, samples in ways.items()}},
                          bytes_moved=8 << 20)
    result.take_limit("limit: ")
    return result


def test_a_case_slower_than_the_best_way_in_every_round_reads_below_the_limit_whatever_the_load():
    # The load changes from round to round (x1 to x5); the case, timed in the
    # same rounds, is 10 % slower than the fastest way in each. It reads at
    # most 1/1.1 of the limit (the quietest round's pass), and less the more
    # of its rounds met the load.
    load = [1.0, 5.0, 2.0, 5.0, 1.0, 4.0, 5.0]
    result = _case_with_limit([0.011 * x for x in load], copy=[0.010 * x for x in load],
                              **{"in place": [0.012 * x for x in load]})
    assert set(result.times) == {"native", "reference", "identity"}
    assert set(result.limit_times) == {"copy", "in place"}
    assert result.fraction_of_limit() == pytest.approx(1 / 1.1 / 4.0)  # median load x4, limit at x1
    assert result.fastest_fraction_of_limit() == pytest.approx(1 / 1.1)
    assert result.summary()["native_fastest_round_fraction_of_limit"] == pytest.approx(1 / 1.1)


def test_a_case_as_fast_as_the_best_way_never_reads_above_the_limit_on_noise():
    # The kernel alone moves the bytes as fast as the best way: the two differ
    # only by noise, +-2 % round by round, here with the case's median on the
    # quiet side and the way's on the loaded one. Median against median read
    # 104 % (the old limit); against the way's fastest pass, 100 %.
    way = [0.0098, 0.0102, 0.0102, 0.0102, 0.0098]
    case = [0.0102, 0.0098, 0.0098, 0.0098, 0.0102]
    assert statistics.median(way) / statistics.median(case) > 1.04 - 1e-9  # what the old limit read
    result = _case_with_limit(case, **{"in place": way})
    assert result.fraction_of_limit() == pytest.approx(1.0)
    assert result.fastest_fraction_of_limit() == pytest.approx(1.0)


def test_cases_time_the_limits_ways_in_their_own_rounds(small_cache):
    ways = limit.LimitWays(4 << 20)
    try:
        result = bench.case_function(1 << 20, tf.float32, 3, False, "float", beside=ways.calls)
    finally:
        ways.close()
    assert set(result.times) == set(bench.IMPLEMENTATIONS)  # the ways are not implementations
    assert {limit.LIMIT_PREFIX + name for name in result.limit_times} == set(ways.calls)
    assert all(len(samples) == 3 for samples in result.limit_times.values())
    assert result.limit_gbps == limit_from_times(4 << 20, result.limit_times).gbps
    assert 0 < result.fraction_of_limit() < math.inf


def test_every_row_of_a_size_is_read_against_the_fastest_pass_of_the_whole_run():
    quiet = _case_with_limit([0.02] * 3, copy=[0.010, 0.011, 0.012], multiply=[0.05] * 3)  # own limit: 0.010
    loaded = _case_with_limit([0.02] * 3, copy=[0.015, 0.016, 0.017], multiply=[0.05] * 3)
    in_cache = bench.Result("fwd+bwd", "eager", 1 << 20, "float32", "variable", {"native": [0.02]},
                            bytes_moved=8 << 20, limit_times={"copy": [0.001]})  # no limit applies
    kernel = limit.KernelBandwidth(1 << 20, 4 << 20, 1.0, 1.0, {"copy": [0.008, 0.009]})
    limits = cli.pooled_limits([quiet, loaded, in_cache], [kernel])
    assert limits[4 << 20].gbps == pytest.approx(2 * (4 << 20) / 0.001 / 1e9)  # pools every row's samples
    limits = cli.pooled_limits([quiet, loaded], [kernel])
    assert limits[4 << 20].rounds == 3 + 3 + 2  # every round, the kernel alone's (no multiply) too
    cli.read_against_pooled_limits([quiet, loaded, in_cache], [kernel], limits)
    fastest = 2 * (4 << 20) / 0.008 / 1e9  # the kernel alone's rounds met the quietest moment
    assert quiet.limit_gbps == loaded.limit_gbps == kernel.limit_gbps == pytest.approx(fastest)
    assert in_cache.limit_gbps is None


def test_the_limits_ways_include_the_kernels_own_pass_and_move_every_byte():
    ways = limit.LimitWays(1 << 12)
    try:
        names = {name[len(limit.LIMIT_PREFIX):].split(",")[0] for name in ways.calls}
        assert names == {"numpy copy", "numpy in place", "kernel", "kernel in place", "tf.function multiply"}
        streaming = next(way for way in ways.copies if len(way.parts[0]) == 2
                         and way.parts[0][0].dtype == np.float32 and not np.shares_memory(*way.parts[0]))
        src, dst = streaming.parts[0]
        src[:] = np.arange(src.size, dtype=np.float32)
        streaming()
        np.testing.assert_array_equal(dst, -src)
    finally:
        ways.close()


def test_without_the_kernel_module_the_limit_keeps_the_other_ways(monkeypatch):
    monkeypatch.setattr(limit, "_raw_kernels", lambda: None)
    ways = limit.LimitWays(1 << 12)
    try:
        assert not any("kernel" in name for name in ways.calls) and len(ways.calls) >= 3
    finally:
        ways.close()


def test_a_kernel_pass_is_nine_passes_minus_one_over_eight_per_round():
    assert limit.pass_times([1.0, 2.0], [9.0, 4.0]) == [1.0, 0.25]


@pytest.mark.parametrize("one, nine, expected", [
    ([1.0, 1.0, 1.0], [9.0, 9.0, 9.0], 1.0),
    ([1.0, 2.0, 1.0], [1.0, 1.5, 1.0], None),  # 9 passes "faster" than 1: noise, no figure
    ([1.0], [1.0], None),
])
def test_kernel_time_is_positive_or_no_figure(one, nine, expected):
    assert limit.kernel_seconds(one, nine) == expected


def test_kernel_bandwidth_is_a_finite_positive_figure_beside_its_limit(small_cache):
    # 4M float32 (16 MiB): 8 passes take milliseconds, well above the noise
    # between two tf.function calls, so a figure must come out.
    row = bench.kernel_bandwidth(1 << 22, tf.float32, 5)
    assert row.gbps is not None and math.isfinite(row.gbps) and 0.1 < row.gbps < 10_000, row
    assert row.limit_gbps is not None and math.isfinite(row.limit_gbps) and 0.1 < row.limit_gbps < 10_000, row
    assert math.isfinite(row.fraction_of_limit()) and row.fraction_of_limit() > 0


def test_native_backward_allocates_nothing_where_the_reference_allocates_float32_temporaries():
    assert bench.backward_allocations("native", 4096, tf.float16) == 0
    assert bench.backward_allocations("reference", 4096, tf.float16) >= 4096 * 4


def test_profiler_lines_are_kept_from_stderr_unless_verbose(capfd):
    def write_from_c():  # what the profiler does: write to file descriptor 2 directly
        os.write(2, b"I0000 profiler_session.cc:117] Profiler session initializing.\n")

    with allocations.native_stderr_captured(verbose=False):
        write_from_c()
    assert "Profiler" not in capfd.readouterr().err
    with allocations.native_stderr_captured(verbose=True):
        write_from_c()
    assert "Profiler session initializing" in capfd.readouterr().err
    with pytest.raises(RuntimeError), allocations.native_stderr_captured(verbose=False):
        write_from_c()
        raise RuntimeError("a failed run shows its log lines")
    assert "Profiler session initializing" in capfd.readouterr().err


def test_allocation_count_prints_no_profiler_chatter(capfd):
    bench.backward_allocations("native", 1024, tf.float32)
    captured = capfd.readouterr()
    assert "profiler" not in (captured.out + captured.err).lower()
    assert "GPU trace" not in captured.err


@pytest.mark.parametrize("text, sizes", [("1K", [1024]), ("16M,64M", [1 << 24, 1 << 26]), ("1000, 2k", [1000, 2048]),
                                         ("1G", [1 << 30])])
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
    results = [bench.Result("fwd+bwd", "eager", 1024, "float32", kind,
                            {"native": [1e-4], "reference": [2e-4], "identity": [0.9e-4]})
               for kind in ("float", "variable")]
    text = table.format_table(results)
    assert text.index("lambda: a tf.Variable") < text.index("lambda: a Python float")
    assert text.count("ref/ native/") == 2 and text.count("native   floor") == 2  # a header per section


def table_results(size_bytes: int = 4) -> list:
    """Rows of every kind a run has: eager 1K (no GB/s), 1M (in a 32 MiB
    cache), 64M (a limit), chain, DANN step; long numbers, the widest dtype."""
    dtype = {2: "bfloat16", 4: "float32"}[size_bytes]
    rows = []
    for case, mode, size in [("fwd+bwd", "eager", 1 << 10), ("fwd+bwd", "tf.function", 1 << 20),
                             ("fwd+bwd", "xla", 1 << 26), ("chain", "tf.function", 1 << 24),
                             ("dann step", "tf.function", 256)]:
        floor = {"dann step": "no GRL", "chain": "identity"}.get(case, "identity+read")
        moved = 2 * size * size_bytes if case == "fwd+bwd" and size >= 1 << 20 else 0
        rows.append(bench.Result(case, mode, size, dtype if case != "dann step" else "float32", "variable",
                                 {"native": [0.123456], "reference": [0.654321], floor: [0.0999]}, bytes_moved=moved,
                                 limit_gbps=57.3 if size == 1 << 26 else None))
    return rows


def test_table_rows_fit_the_width_with_a_header_a_reader_can_read(monkeypatch):
    monkeypatch.setattr(limit, "last_level_cache_bytes", lambda: 32 << 20)
    text = table.format_table(table_results(2))
    assert max(len(line) for line in text.splitlines()) <= table.WIDTH == 100, text
    top, bottom = next((a, b) for a, b in zip(text.splitlines(), text.splitlines()[1:]) if b.startswith("case "))
    # Each header cell read downwards: both lines cut where the lower line's words end.
    ends = [m.end() for m in re.finditer(r"\S+", bottom)]
    cells = [" ".join(line[start:end].strip() for line in (top, bottom)).strip()
             for start, end in zip([0, *ends], ends)]
    assert cells == ["case", "mode", "size", "dtype", "native ms", "reference ms", "floor ms", "ref/ native",
                     "native/ floor", "backward GB/s", "limit GB/s", "% of limit"], cells
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
    assert main(["bench", "--sizes", "256,1K", "--rounds", "2", "--no-memory", "--no-dann",
                 "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "ref/ native/" in printed and "chain" in printed and "native/(identity+read)" in printed
    payload = json.loads((tmp_path / "bench.json").read_text())
    rows = [r for r in payload["results"] if r["case"] == "fwd+bwd"]
    assert {r["size"] for r in rows} == {256, 1024}
    assert {r["lambda_kind"] for r in rows} == {"variable", "float"}
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_measures_the_limit_for_bandwidth_bound_sizes(tmp_path, capsys, small_cache):
    assert main(["bench", "--sizes", "1M", "--rounds", "2", "--lambda", "variable", "--no-memory",
                 "--no-dann", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "memory-bandwidth limit" in printed and "kernel alone" in printed
    payload = json.loads((tmp_path / "bench.json").read_text())
    graph_rows = [r for r in payload["results"] if r["mode"] == "tf.function" and r["case"] == "fwd+bwd"]
    assert graph_rows and all(r["limit_gbps"] > 0 and r["native_fraction_of_limit"] > 0 for r in graph_rows)
    assert payload["bandwidth_limits"][0]["method"] in payload["bandwidth_limits"][0]["methods"]
    assert "timed in the same rounds" in printed
    kernel = payload["kernel_in_place_bandwidth"]
    assert [row["size"] for row in kernel] == [1 << 20]
    assert kernel[0]["limit_gbps"] > 0


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

    ways = {f"{limit.LIMIT_PREFIX}{name}, 2 threads": [0.004, 0.005, 0.006]
            for name in ("numpy copy", "numpy in place", "kernel", "kernel in place", "tf.function multiply")}
    limits = {size: limit_from_times(size, ways) for size in (64 << 10, 4 << 20, 64 << 20)}
    kernel = limit.KernelBandwidth(1 << 20, 4 << 20, 1.0, 1.0, ways)
    text = table.format_limits(limits, 4) + "\n" + table.format_kernel_rows([kernel], "float32")
    assert max(len(line) for line in text.splitlines()) <= table.WIDTH, text
    assert "tf.function multiply" in text.replace("\n          ", " ")  # wrapped, not cut


def test_interleaved_rotates_the_first_callables_and_settles_each_sample():
    log = []
    calls = {name: (lambda name=name: log.append(name)) for name in ("a", "b", "c", "way")}
    bench.interleaved(calls, rounds=3, settle=2, rotate=3, after_round=lambda: log.append("|"))
    rounds = "".join(log[4:]).split("|")[:-1]  # after the warm-up calls
    assert rounds == [first + "way" * 3 for first in ("aaabbbccc", "bbbcccaaa", "cccaaabbb")]


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
            rows.append(bench.Result("fwd+bwd", mode, size, "float32", "variable",
                                     {"native": [seconds] * 3, "reference": [2 * seconds] * 3,
                                      "identity+read": [0.9 * seconds] * 3},
                                     bytes_moved=size * 8, limit_gbps=30.0 if limited else None))
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
    assert "native (tf.function)" in labels


def test_without_out_the_command_writes_json_and_plot_to_the_default_folder_and_says_where(tmp_path, capsys,
                                                                                          monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--sizes", "256", "--rounds", "2", "--lambda", "float", "--no-memory", "--no-dann"]) == 0
    printed = capsys.readouterr().out
    folder = tmp_path / cli.DEFAULT_OUT
    assert (folder / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (folder / "bench.json").is_file()
    assert f"wrote {os.path.join(cli.DEFAULT_OUT, 'bench.json')} and {os.path.join(cli.DEFAULT_OUT, 'bench.png')}" in printed
