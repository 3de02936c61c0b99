"""The bench's account of its regime: the CPU, kernel path, stores and
huge-page mode it prints, the in-place case it adds where a fresh dx is
page-fault bound, and the plot's shading of those sizes."""

import json

import numpy as np
import pytest
import tensorflow as tf

from grad_reverse import bench
from grad_reverse.__main__ import main
from grad_reverse.bench import cli, regime

EPYC = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse2 avx fma avx2 f16c

processor\t: 1
model name\t: something else
"""
XEON = """processor\t: 0
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480C
flags\t\t: avx fma avx2 avx512f avx512bw avx512_bf16
"""


def test_the_cpu_is_named_with_its_family_model_and_vector_instructions():
    assert regime.cpu_model(EPYC) == "AMD EPYC 7B13 (cpu family 25, model 1, AVX2 + FMA, no AVX-512)"
    assert regime.cpu_model(XEON) == "Intel(R) Xeon(R) Platinum 8480C (cpu family 6, model 143, AVX-512 with BF16)"


@pytest.mark.parametrize("text, mode", [("always [madvise] never\n", "madvise"), ("[always] madvise never", "always")])
def test_the_huge_page_mode_is_the_bracketed_word(tmp_path, text, mode):
    path = tmp_path / "enabled"
    path.write_text(text)
    assert regime.huge_page_mode(path) == mode
    assert regime.huge_page_mode(tmp_path / "absent").startswith("unknown")


def test_a_fresh_output_of_32_mib_or_more_is_page_fault_bound():
    assert regime.page_fault_bound(1 << 23, "float32") and not regime.page_fault_bound((1 << 23) - 1, "float32")
    assert regime.page_fault_bound(1 << 24, "bfloat16") and not regime.page_fault_bound(1 << 23, "bfloat16")


def test_the_in_place_case_runs_where_a_fresh_dx_is_page_fault_bound_only():
    steps = cli.plan((1 << 20, 1 << 23, 1 << 24), tf.float32, 1, ("variable",), quick=True, dann=False)
    in_place = [label for label, _ in steps if label.startswith("in place")]
    assert in_place == ["in place 8M float32, variable lambda", "in place 16M float32, variable lambda"]


def test_the_in_place_function_gives_the_reversed_gradient_of_its_own_dy():
    x, dy = tf.range(6, dtype=tf.float32), tf.constant([1.0, -2.0, 3.0, 0.5, 0.0, 4.0])
    for name, layer in bench.cases.LAYERS.items():
        got = regime.in_place_function(layer, 0.5)(x, dy).numpy()
        # The output gradient is -dy: the GRL turns it into 0.5 * dy, the floor passes -dy on.
        want = dy.numpy() * (-1.0 if name == "identity" else 0.5)
        np.testing.assert_array_equal(got, want)


def test_the_command_prints_the_regime_and_times_the_in_place_case(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(regime, "PAGE_FAULT_BOUND_BYTES", 1024)  # 256 float32 counts as large
    argv = ["bench", "--sizes", "256", "--rounds", "2", "--lambda", "float", "--no-memory", "--no-dann"]
    assert main(argv + ["--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    machine = regime.describe()
    assert f"CPU: {machine['cpu']}" in printed
    assert f"CPU path: {machine['cpu_path']}; streaming stores: " in printed
    assert f"transparent huge pages: {machine['huge_pages']}" in printed
    assert "in place: dy is made in the graph" in " ".join(printed.split())  # the note is wrapped
    assert "in place tf.function: reference/native" in printed
    payload = json.loads((tmp_path / "bench.json").read_text())
    assert set(payload["machine"]) == {"cpu", "cpu_path", "streaming_stores", "huge_pages"}
    cases = {(r["case"], r["mode"]) for r in payload["results"]}
    assert ("in place", "tf.function") in cases and ("fwd+bwd", "tf.function") in cases


def _panel_labels(sizes):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from grad_reverse.bench import plot

    rows = []
    for size in sizes:
        times = {"native": [1e-3] * 3, "reference": [2e-3] * 3, "identity": [0.5e-3] * 3}
        rows.append(bench.Result("fwd+bwd", "tf.function", size, "float32", "variable", times))
        if regime.page_fault_bound(size, "float32"):
            rows.append(bench.Result("in place", "tf.function", size, "float32", "variable", times))
    figure, ax = plt.subplots()
    plot._panel(ax, rows, "variable")
    labels = ax.get_legend_handles_labels()[1]
    plt.close(figure)
    return labels


def test_the_plot_shades_the_page_fault_bound_sizes_and_draws_the_in_place_case_there():
    labels = _panel_labels((1 << 20, 1 << 24, 1 << 26))
    assert any(label.startswith("page-fault bound") for label in labels)
    assert "native (tf.function, in place)" in labels
    labels = _panel_labels((1 << 10, 1 << 20))
    assert not any(label.startswith("page-fault bound") or "in place" in label for label in labels)
