#!/usr/bin/env bash
# Builds the framework-free kernels (the kernels-only build) with
# ThreadSanitizer and runs the CPU kernels from many threads under it:
#   1. cc/tests/cpu_threads_check.cc, a C++ driver: threads racing the first
#      read of GRAD_REVERSE_CPU_PATH, every dtype sharded over threads in
#      place and out of place (streaming stores included), and path switches
#      while threads run; every value checked against the portable path;
#   2. the same kernels through the pybind11 module: tests/op/test_cpu_path_threads.py
#      (no TensorFlow; the uninstrumented interpreter gets the TSan runtime
#      preloaded, as scripts/sanitize.sh does for ASan);
#   3. a self-check that TSan is really watching: the driver again, built
#      from a copy of grad_reverse_cpu.cc whose read of GRAD_REVERSE_CPU_PATH
#      is made racy on purpose (a plain "read yet?" flag instead of a
#      function-local static); TSan must report a data race there, or the
#      script fails. (TSAN_SELF_CHECK=0 skips it.)
#
# Usage: scripts/tsan.sh [BUILD_DIR]     (PYTHON=... to pick the interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build-tsan}
python=${PYTHON:-python3}
flags="-fsanitize=thread -g"
# exitcode: what a run with a report exits with, told apart from test failures.
export TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1"
export GRAD_REVERSE_CPU_PATH=auto  # set, so the first read parses a value

cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGRAD_REVERSE_KERNELS_ONLY=ON -DGRAD_REVERSE_CUDA=OFF -DGRAD_REVERSE_SANITIZE=OFF \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" \
  -DPython_EXECUTABLE="$(command -v "$python")" \
  -Dpybind11_DIR="$("$python" -c 'import pybind11; print(pybind11.get_cmake_dir())')" >/dev/null
cmake --build "$build_dir" -j "$(nproc)" >/dev/null

# The driver uses std::barrier (C++20); the kernels it links stay C++17.
driver=(g++ -std=c++20 -O1 $flags -I. cc/tests/cpu_threads_check.cc -pthread)
"${driver[@]}" "$build_dir/libgrad_reverse_compute.a" "$build_dir/libgrad_reverse_cpu_compute.a" \
  -o "$build_dir/cpu_threads_check"
"$build_dir/cpu_threads_check"

# The suppression covers the loader freeing a finished Python thread's
# dynamic TLS (see the file); nothing in our code is suppressed.
TSAN_OPTIONS="$TSAN_OPTIONS:suppressions=$PWD/scripts/tsan_pybind.supp" \
LD_PRELOAD="$(gcc -print-file-name=libtsan.so)" GRAD_REVERSE_KERNELS_DIR="$build_dir" \
  "$python" -m pytest -q --noconftest -p no:cacheprovider tests/op/test_cpu_path_threads.py

if [[ "${TSAN_SELF_CHECK:-1}" != 0 ]]; then
  planted="$build_dir/planted_race"
  mkdir -p "$planted"
  "$python" - cc/compute/grad_reverse_cpu.cc "$planted/grad_reverse_cpu.cc" <<'EOF'
import sys
source, target = sys.argv[1:]
text = open(source).read()
safe = "  static const EnvironmentChoice choice = ReadEnvironment();\n  return choice;\n"
racy = ("  static EnvironmentChoice choice;\n  static bool read = false;\n"
        "  if (!read) {\n    choice = ReadEnvironment();\n    read = true;\n  }\n  return choice;\n")
if safe not in text:
    sys.exit("tsan.sh: the planted race no longer applies: Environment() changed; update the self-check")
open(target, "w").write(text.replace(safe, racy).replace('#include "', '#include "cc/compute/'))
EOF
  g++ -std=c++17 -O1 $flags -I. -c "$planted/grad_reverse_cpu.cc" -o "$planted/grad_reverse_cpu.o"
  g++ -std=c++17 -O1 $flags -I. -c cc/compute/neg_scale_x86.cc -o "$planted/neg_scale_x86.o"
  g++ -std=c++17 -O1 $flags -I. -c cc/compute/grad_reverse_cuda_stub.cc -o "$planted/stub.o"
  g++ -std=c++17 -O1 $flags -I. -c cc/compute/parallel_for.cc -o "$planted/parallel_for.o"
  "${driver[@]}" "$planted"/*.o -o "$planted/cpu_threads_check"
  status=0
  "$planted/cpu_threads_check" >"$planted/report.txt" 2>&1 || status=$?
  if [[ $status != 66 ]] || ! grep -q "WARNING: ThreadSanitizer: data race" "$planted/report.txt"; then
    cat "$planted/report.txt"
    echo "tsan.sh: FAIL: the race planted in Environment() was not reported (exit $status); TSan is not watching"
    exit 1
  fi
  echo "self-check: the planted race was reported: $(grep -m1 -A2 'data race' "$planted/report.txt" | tail -1 | sed 's/^ *//')"
fi
echo "thread sanitizer: no report (kernels from C++ threads and from the pybind11 module)"
