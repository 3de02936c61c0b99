"""The benchmark's measurement code, on tiny sizes (timings themselves are
not asserted: this machine is noisy)."""

import json
import math
import os
import statistics
import time

import numpy as np
import pytest
import tensorflow as tf

from grad_reverse import bench
from grad_reverse.__main__ import main
from grad_reverse.bench import allocations, cli, limit
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
    result = bench.Result(
        "fwd+bwd",
        "tf.function",
        1000,
        "float32",
        "variable",
        {"native": [1.0, 2.0, 9.0], "reference": [2.0, 4.0, 18.0], "identity": [1.0, 1.0, 3.0]},
        bytes_moved=8000,
        limit_gbps=8000 / 1.0 / 1e9,
    )
    assert result.ratio() == 2.0
    assert result.floor == "identity" and result.over_floor() == 2.0
    assert result.native_gbps() == pytest.approx(8000 / 2.0 / 1e9)
    assert result.fraction_of_limit() == pytest.approx(0.5)
    summary = result.summary()
    assert summary["min_s"]["native"] == 1.0 and summary["ratio_reference_over_native"] == 2.0
    assert paired_ratio([5.0, 1.0, 1.0], [1.0, 1.0, 1.0]) == 1.0  # one slow round does not move the median


def test_floor_is_identity_plus_read_when_measured():
    result = bench.Result(
        "fwd+bwd",
        "eager",
        8,
        "float32",
        "variable",
        {"native": [1.0], "reference": [2.0], "identity": [0.5], "identity+read": [0.8]},
    )
    assert result.floor == "identity+read"
    assert bench.Result("dann step", "tf.function", 8, "float32", "float", {"no GRL": [1.0]}).floor == "no GRL"


@pytest.mark.parametrize("kind", bench.LAMBDA_KINDS)
def test_cases_run_each_implementation_on_tiny_tensors(kind):
    for result in (
        bench.case_eager(64, tf.float16, 2, kind),
        bench.case_function(64, tf.float32, 2, False, kind),
        bench.case_function(64, tf.bfloat16, 2, True, kind),
        bench.case_chain(64, tf.float32, 2, kind),
    ):
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
    result = bench.Result(
        "fwd+bwd",
        "tf.function",
        1 << 20,
        "float32",
        "variable",
        {
            "native": native,
            "reference": [2 * t for t in native],
            "identity": [0.001] * rounds,
            **{"limit: " + name: samples for name, samples in ways.items()},
        },
        bytes_moved=8 << 20,
    )
    result.take_limit("limit: ")
    return result


def test_a_case_slower_than_the_best_way_in_every_round_reads_below_the_limit_whatever_the_load():
    # The load changes from round to round (x1 to x5); the case, timed in the
    # same rounds, is 10 % slower than the fastest way in each. It reads at
    # most 1/1.1 of the limit (the quietest round's pass), and less the more
    # of its rounds met the load.
    load = [1.0, 5.0, 2.0, 5.0, 1.0, 4.0, 5.0]
    result = _case_with_limit(
        [0.011 * x for x in load], copy=[0.010 * x for x in load], **{"in place": [0.012 * x for x in load]}
    )
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
    in_cache = bench.Result(
        "fwd+bwd",
        "eager",
        1 << 20,
        "float32",
        "variable",
        {"native": [0.02]},
        bytes_moved=8 << 20,
        limit_times={"copy": [0.001]},
    )  # no limit applies
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
        names = {name[len(limit.LIMIT_PREFIX) :].split(",")[0] for name in ways.calls}
        assert names == {"numpy copy", "numpy in place", "kernel", "kernel in place", "tf.function multiply"}
        streaming = next(
            way
            for way in ways.copies
            if len(way.parts[0]) == 2 and way.parts[0][0].dtype == np.float32 and not np.shares_memory(*way.parts[0])
        )
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


@pytest.mark.parametrize(
    "one, nine, expected",
    [
        ([1.0, 1.0, 1.0], [9.0, 9.0, 9.0], 1.0),
        ([1.0, 2.0, 1.0], [1.0, 1.5, 1.0], None),  # 9 passes "faster" than 1: noise, no figure
        ([1.0], [1.0], None),
    ],
)
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


def test_cli_measures_the_limit_for_bandwidth_bound_sizes(tmp_path, capsys, small_cache):
    assert (
        main(
            [
                "bench",
                "--sizes",
                "1M",
                "--rounds",
                "2",
                "--lambda",
                "variable",
                "--no-memory",
                "--no-dann",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
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


def test_interleaved_rotates_the_first_callables_and_settles_each_sample():
    log = []
    calls = {name: (lambda name=name: log.append(name)) for name in ("a", "b", "c", "way")}
    bench.interleaved(calls, rounds=3, settle=2, rotate=3, after_round=lambda: log.append("|"))
    rounds = "".join(log[4:]).split("|")[:-1]  # after the warm-up calls
    assert rounds == [first + "way" * 3 for first in ("aaabbbccc", "bbbcccaaa", "cccaaabbb")]


def test_no_row_passes_its_sizes_limit_where_the_kernel_outran_every_way():
    """Seen on a Zen 4: the kernel alone's median (8 passes in a row) beat the fastest single pass
    of every way (103 % of the limit). The limit is then the kernel's figure, named for it."""
    case = _case_with_limit([0.02] * 3, copy=[0.010, 0.011, 0.012], multiply=[0.05] * 3)
    ways_fastest = 2 * (4 << 20) / 0.010 / 1e9
    kernel = limit.KernelBandwidth(1 << 20, 4 << 20, 1.03 * ways_fastest, ways_fastest, {"copy": [0.011, 0.012]})
    limits = cli.pooled_limits([case], [kernel])
    assert limits[4 << 20].gbps == pytest.approx(1.03 * ways_fastest)
    assert limits[4 << 20].method == "the kernel alone"
    cli.read_against_pooled_limits([case], [kernel], limits)
    assert kernel.fraction_of_limit() == pytest.approx(1.0)
    assert case.fraction_of_limit() <= 1.0


def test_the_bench_refuses_limits_that_a_row_passes():
    case = _case_with_limit([0.02] * 3, copy=[0.010, 0.011, 0.012], multiply=[0.05] * 3)
    kernel = limit.KernelBandwidth(1 << 20, 4 << 20, 1e6, 1.0, {"copy": [0.011]})
    limits = {4 << 20: limit_from_times(4 << 20, {"copy": [0.010]})}  # a limit not made by pooled_limits
    with pytest.raises(RuntimeError, match=r"rows pass their size's memory-bandwidth limit: \[\('the kernel alone'"):
        cli.read_against_pooled_limits([case], [kernel], limits)
