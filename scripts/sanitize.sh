#!/usr/bin/env bash
# Builds the framework-free kernels (the pybind11 module) with AddressSanitizer
# and UndefinedBehaviorSanitizer and runs the kernel-module tests under them
# (the kernels, and the CPU path switch under threads), and the CUDA kernel's
# code on the CPU under an emulated grid (cc/tests/cuda_emulated_grid, where
# the CUDA headers are found), so an index out of bounds fails loudly.
# No TensorFlow is imported (pytest --noconftest; the module is imported as the
# top-level `_kernels`), so every report concerns our code. The sanitizer
# runtimes are preloaded because the Python interpreter is not instrumented.
#
# Usage: scripts/sanitize.sh [BUILD_DIR]     (PYTHON=... to pick the interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build-sanitize}
python=${PYTHON:-python3}

cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGRAD_REVERSE_KERNELS_ONLY=ON -DGRAD_REVERSE_CUDA=OFF -DGRAD_REVERSE_SANITIZE=ON \
  -DGRAD_REVERSE_EMULATED_GRID=ON \
  -DPython_EXECUTABLE="$(command -v "$python")" \
  -Dpybind11_DIR="$("$python" -c 'import pybind11; print(pybind11.get_cmake_dir())')" >/dev/null
cmake --build "$build_dir" -j "$(nproc)" >/dev/null

runtimes="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
# detect_leaks=0: CPython itself keeps allocations alive until exit.
LD_PRELOAD="$runtimes" \
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
GRAD_REVERSE_KERNELS_DIR="$build_dir" \
  "$python" -m pytest -q --noconftest -p no:cacheprovider tests/op/test_kernels_module.py \
    tests/op/test_cpu_path_threads.py

emulated="$build_dir/cc/tests/cuda_emulated_grid"
if [[ -x "$emulated" ]]; then
  ASAN_OPTIONS=abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "$emulated"
else
  echo "cuda_emulated_grid: skipped, no CUDA headers found (put nvcc on PATH or set CUDAToolkit_ROOT)"
fi
echo "sanitizers: no report (ASan + UBSan)"
