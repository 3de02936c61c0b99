"""The CUDA kernel's own code on the CPU: cc/tests/cuda_emulated_grid, built
with the host compiler against the CUDA headers only (no runtime, driver or
GPU), runs the kernel bodies for every (block, thread) of the planned grid
and compares every output bitwise with the CPU kernel (docs/gpu.md).

The source tree is the one next to tests/, or GRAD_REVERSE_SOURCE_DIR (the
mutation check points it at a mutated copy of cc/)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = Path(os.environ.get("GRAD_REVERSE_SOURCE_DIR") or Path(__file__).resolve().parents[2])
NO_HEADERS = "grad_reverse: no CUDA headers found"
DTYPES = ("half", "bfloat16", "float", "double")


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> Path:
    project = SOURCE / "cc" / "tests"
    if not (project / "CMakeLists.txt").is_file():
        pytest.skip(f"no source tree at {SOURCE} (cc/tests/CMakeLists.txt): run the tests from a checkout")
    if not (shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")):
        pytest.skip("no C++ compiler on PATH: the emulated grid is a C++ program")
    # The environment's bin directory first: pip installs cmake there.
    cmake = shutil.which("cmake", path=str(Path(sys.executable).parent)) or shutil.which("cmake")
    if cmake is None:
        pytest.fail("the emulated grid is built with CMake: `pip install cmake`")
    build = tmp_path_factory.mktemp("cuda_emulated_grid")
    configure = [cmake, "-S", str(project), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    result = subprocess.run(configure, capture_output=True, text=True)
    if result.returncode != 0 and NO_HEADERS in result.stdout + result.stderr:
        pytest.skip(
            "no CUDA headers found (nvcc on PATH, CUDAToolkit_ROOT, CUDA_PATH or /usr/local/cuda): "
            "the emulated grid compiles the kernel against cuda_fp16.h and cuda_bf16.h"
        )
    assert result.returncode == 0, f"configure failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
    result = subprocess.run([cmake, "--build", str(build), "-j2"], capture_output=True, text=True)
    assert result.returncode == 0, f"build failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
    return build / "cuda_emulated_grid"


def case_counts(output: str) -> dict:
    """{dtype: {column: count}} from the driver's table."""
    lines = output.splitlines()
    header = next(line for line in lines if line.startswith("dtype"))
    columns = header.split()[1:]
    counts = {}
    for line in lines:
        fields = line.split()
        if fields and fields[0] in DTYPES:
            counts[fields[0]] = dict(zip(columns, map(int, fields[1:])))
    return counts


@pytest.mark.slow  # the driver fixture compiles cc/tests/cuda_emulated_grid with CMake
def test_every_case_of_the_emulated_grid_equals_the_cpu_kernel(driver):
    result = subprocess.run([str(driver)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "emulated grid: every case equals the CPU kernel" in result.stdout
    counts = case_counts(result.stdout)
    # Every dtype ran every path, and plans past 2^31 elements, so the pass
    # above is not a run of nothing.
    assert set(counts) == set(DTYPES), result.stdout
    for dtype, row in counts.items():
        for column in ("vectorized", "scalar", "unaligned", "in-place", "plan-only"):
            assert row[column] > 0, (dtype, column, result.stdout)
