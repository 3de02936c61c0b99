"""The GPU device check, scripts/gpu_check_lib/ (run by scripts/gpu_check.sh), in
its --cpu-only mode: the CPU kernel stands in for the device, so every
CPU-side part runs here (options, the references, the case and guard logic,
the --small re-run that a sanitizer would wrap, the bandwidth table, the
JSON). The kernel module is this build's own `_kernels`, copied into a
directory by itself, as the check imports it from a CMake build directory."""

import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "scripts" / "gpu_check_lib"
QUICK = [
    "--cpu-only",
    "--sizes",
    "0,3,4097",
    "--bandwidth-sizes",
    "64K",
    "--bandwidth-dtypes",
    "float32",
    "--reps",
    "2",
    "--sanitizers",
    "memcheck",
]


def kernels_module_path() -> Path:
    try:
        import _kernels  # a kernels-only build (scripts/sanitize.sh) puts it on the path
    except ImportError:
        from grad_reverse import _kernels
    return Path(_kernels.__file__)


@pytest.fixture
def build_dir(tmp_path) -> Path:
    """A directory holding only the `_kernels` module, as a CMake build directory does."""
    directory = tmp_path / "build"
    directory.mkdir()
    module = kernels_module_path()
    shutil.copy(module, directory / module.name)
    return directory


def run_check(
    *args: str, command: tuple[str, ...] = ("-m", "gpu_check_lib"), **env: str
) -> subprocess.CompletedProcess:
    """The check run as `python COMMAND ARGS` with scripts/ on PYTHONPATH (as
    scripts/gpu_check.sh runs it), without the variables a device run sets,
    with `env` added."""
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("OUT", "GPU_CHECK_T0")},
        "PYTHONPATH": str(CHECK.parent),
        **env,
    }
    return subprocess.run([sys.executable, *command, *args], capture_output=True, text=True, env=env, timeout=600)


def test_cpu_only_runs_every_part_and_writes_the_json(build_dir, tmp_path):
    report_path = tmp_path / "gpu_check.json"
    result = run_check("--build-dir", str(build_dir), *QUICK, "--json", str(report_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "correctness: all" in result.stdout and "checks passed" in result.stdout
    report = json.loads(report_path.read_text())
    assert report["ok"] is True and report["mode"] == "cpu-only"
    assert report["correctness"]["failed"] == 0 and report["correctness"]["checks"] > 700
    cases = {r["case"] for r in report["correctness"]["records"]}
    assert {
        "cpu_kernel_vs_numpy_all_16_bit",
        "aligned",
        "offset1",
        "in_place_offset1",
        "stream",
        "inputs_unchanged",
    } <= cases
    # The --small re-run (what compute-sanitizer wraps on a GPU) ran and reported.
    assert [s["status"] for s in report["sanitizer"]] == ["ran-without-sanitizer"]
    assert {(r["dtype"], r["mode"]) for r in report["bandwidth"]} == {
        ("float32", "out_of_place"),
        ("float32", "in_place"),
    }
    assert all(r["kernel_GBps"] > 0 and r["copy_GBps"] > 0 for r in report["bandwidth"])


BROKEN_KERNELS = '''
"""`_kernels` with its float32 CPU kernel off by one bit in the last element."""
import importlib.util

import numpy as np

_spec = importlib.util.spec_from_file_location("_kernels", {real!r})
_real = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_real)


def neg_scale_cpu(x, lambda_, out=None):
    result = _real.neg_scale_cpu(x, lambda_) if out is None else _real.neg_scale_cpu(x, lambda_, out=out)
    result = out if out is not None else result
    if np.asarray(result).dtype == np.float32 and np.asarray(result).size > 1:
        np.asarray(result).view(np.uint32)[-1] ^= 1
    return result


def __getattr__(name):
    return getattr(_real, name)
'''


def test_a_wrong_kernel_fails_the_check(build_dir, tmp_path):
    # The check's own negative control: a kernel one bit off fails it, exit 1.
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "_kernels.py").write_text(BROKEN_KERNELS.format(real=str(build_dir / kernels_module_path().name)))
    result = run_check("--build-dir", str(broken), *QUICK)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAILED" in result.stdout
    assert "float32   cpu_kernel_vs_numpy" in result.stdout


def test_no_kernel_module_is_a_setup_error(tmp_path):
    result = run_check("--build-dir", str(tmp_path), "--cpu-only")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "gpu_check: cannot run: cannot import the kernel module `_kernels`" in result.stdout


def test_bad_options_name_what_is_accepted(build_dir):
    result = run_check("--build-dir", str(build_dir), "--bandwidth-dtypes", "float8")
    assert result.returncode == 2
    assert (
        "unknown dtype 'float8' in --bandwidth-dtypes; accepted: float16, bfloat16, float32, float64" in result.stderr
    )


def test_run_as_a_directory_it_says_how_to_run_it(build_dir):
    result = run_check("--build-dir", str(build_dir), *QUICK, command=(str(CHECK),))
    assert result.returncode == 1 and "python -m gpu_check_lib" in result.stderr, result.stdout + result.stderr


def test_no_file_of_the_check_is_over_450_lines():
    lengths = {path.name: len(path.read_text().splitlines()) for path in CHECK.glob("*.py")}
    assert len(lengths) >= 8 and max(lengths.values()) <= 450, lengths


@pytest.mark.slow
def test_gpu_check_sh_cpu_only_builds_the_module_and_passes(tmp_path):
    """What a user runs without a GPU: scripts/gpu_check.sh --cpu-only builds
    the kernels-only module with CMake (no TensorFlow) and runs the check."""
    if shutil.which("c++") is None and shutil.which("g++") is None:
        pytest.skip("no C++ compiler")
    pytest.importorskip("pybind11", reason="gpu_check.sh builds the module with this Python's pybind11")
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path / "out")}
    result = subprocess.run(
        [
            "bash",
            str(ROOT / "scripts" / "gpu_check.sh"),
            "--cpu-only",
            "--build-dir",
            str(tmp_path / "build"),
            *QUICK[1:],
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "== gpu_check.sh: exit status 0" in result.stdout
    assert json.loads((tmp_path / "out" / "gpu_check.json").read_text())["ok"] is True
    assert "gpu_check.sh: kernel module built" in (tmp_path / "out" / "gpu_check.log").read_text()


def test_the_kernels_module_suffix_is_an_extension_suffix():
    # What the build-directory copy above relies on.
    assert any(kernels_module_path().name.endswith(s) for s in importlib.machinery.EXTENSION_SUFFIXES)
