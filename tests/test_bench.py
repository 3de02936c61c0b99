"""The benchmark's measurement code, on tiny sizes (timings themselves are
not asserted: this machine is noisy)."""

import json
import time

import pytest
import tensorflow as tf

from grad_reverse import bench
from grad_reverse.__main__ import main


def test_interleaved_times_every_callable_each_round():
    calls = {"fast": lambda: None, "slow": lambda: time.sleep(0.002)}
    times = bench.interleaved(calls, rounds=4, per_round=2)
    assert set(times) == {"fast", "slow"} and all(len(v) == 4 for v in times.values())
    assert min(times["slow"]) >= 0.002 > max(times["fast"])


def test_result_ratio_and_bandwidth_come_from_medians():
    result = bench.Result("fwd+bwd", "tf.function", 1000, "float32",
                          {"native": [1.0, 2.0, 9.0], "reference": [4.0, 4.0, 4.0]}, bytes_moved=8000)
    assert result.ratio() == 2.0
    assert result.native_gbps() == pytest.approx(8000 / 2.0 / 1e9)
    summary = result.summary()
    assert summary["min_s"]["native"] == 1.0 and summary["ratio_reference_over_native"] == 2.0


def test_cases_run_each_implementation_on_tiny_tensors():
    for result in (bench.case_eager(64, tf.float16, 2), bench.case_function(64, tf.float32, 2),
                   bench.case_function(64, tf.bfloat16, 2, jit=True), bench.case_chain(64, tf.float32, 2)):
        assert set(result.times) == set(bench.IMPLEMENTATIONS)
        assert all(len(v) == 2 and min(v) > 0 for v in result.times.values())


def test_dann_step_case_compares_against_no_layer():
    result = bench.case_dann_step(8, 16, 2)
    assert set(result.times) == {"native", "reference", "no GRL"}


def test_bandwidth_measurements_are_positive():
    assert bench.memory_limit_gbps(1 << 12, tf.float32, 2) > 0
    native, numpy_limit = bench.kernel_bandwidth(1 << 12, tf.float32, 3)
    assert numpy_limit > 0 and native != 0


def test_native_backward_allocates_nothing_where_the_reference_allocates_float32_temporaries():
    assert bench.backward_allocations("native", 4096, tf.float16) == 0
    assert bench.backward_allocations("reference", 4096, tf.float16) >= 4096 * 4


def test_cli_writes_json_and_plot(tmp_path, capsys):
    assert main(["bench", "--sizes", "256,1024", "--rounds", "2", "--no-memory", "--no-dann",
                 "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "ref/native" in printed and "chain" in printed
    payload = json.loads((tmp_path / "bench.json").read_text())
    assert {r["size"] for r in payload["results"] if r["case"] == "fwd+bwd"} == {256, 1024}
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_rejects_bad_sizes():
    with pytest.raises(SystemExit):
        main(["bench", "--sizes", "1k"])
