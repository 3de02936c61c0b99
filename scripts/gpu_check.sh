#!/usr/bin/env bash
# Device check of the CUDA kernel on a GPU machine that has
# nvcc, CMake, pybind11 and CuPy but no TensorFlow: builds only the pybind11
# kernel module (-DGRAD_REVERSE_KERNELS_ONLY=ON, which needs no TensorFlow),
# then runs the check, scripts/gpu_check_lib/ (a Python package), on it: correctness for every dtype and size,
# compute-sanitizer on a small case, bandwidth against a device-to-device copy.
# With OUT set, the whole log goes to $OUT/gpu_check.log and the results to
# $OUT/gpu_check.json.
#
#   scripts/gpu_check.sh                 # on the GPU machine (sm_90 only, to keep the build short)
#   scripts/gpu_check.sh --cpu-only      # anywhere: the CPU-side parts, module built without CUDA
#
# Options: --cpu-only, --build-dir DIR; anything else goes to the check
# (see `PYTHONPATH=scripts python3 -m gpu_check_lib --help`). Environment: PYTHON (default
# python3), CUDA_ARCHITECTURES (default 90), GRAD_REVERSE_CUDA (default ON,
# OFF with --cpu-only; ON with --cpu-only compiles the CUDA kernel without
# needing a GPU).
set -euo pipefail

started=$(date +%s)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-python3}
cpu_only=0
build_dir=""
py_args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --cpu-only) cpu_only=1; py_args+=(--cpu-only) ;;
    --build-dir) build_dir=${2:?--build-dir needs a directory}; shift ;;
    --build-dir=*) build_dir=${1#--build-dir=} ;;
    -h|--help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) py_args+=("$1") ;;
  esac
  shift
done

if [[ $cpu_only == 1 ]]; then cuda=${GRAD_REVERSE_CUDA:-OFF}; else cuda=${GRAD_REVERSE_CUDA:-ON}; fi
# Outside the source tree's build/ (the developer's own build lives there),
# one directory per configuration so a CUDA and a CPU build never share a cache.
build_dir=${build_dir:-${TMPDIR:-/tmp}/grad-reverse-gpu-check-cuda-${cuda}}

run() {
  echo "== gpu_check.sh: $(uname -n), $(date -u +%Y-%m-%dT%H:%M:%SZ), cuda=$cuda, build dir $build_dir"
  local python_exe pybind11_dir
  python_exe=$(command -v "$python") || { echo "gpu_check.sh: no Python interpreter '$python' (set PYTHON)" >&2; return 2; }
  pybind11_dir=$("$python_exe" -c 'import pybind11; print(pybind11.get_cmake_dir())') \
    || { echo "gpu_check.sh: $python_exe cannot import pybind11" >&2; return 2; }

  local cmake=cmake
  if ! command -v cmake >/dev/null; then
    # pip's cmake lands next to the interpreter, which may not be on PATH.
    cmake=$(dirname "$python_exe")/cmake
    [[ -x $cmake ]] || { echo "gpu_check.sh: cmake not found (PATH, or next to $python_exe)" >&2; return 2; }
  fi

  local args=(-S "$repo" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release
              -DGRAD_REVERSE_KERNELS_ONLY=ON -DGRAD_REVERSE_CUDA="$cuda"
              -DPython_EXECUTABLE="$python_exe" -Dpybind11_DIR="$pybind11_dir")
  if [[ $cuda != OFF ]]; then
    args+=(-DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES:-90}")
    if [[ -z ${CUDACXX:-} ]] && ! command -v nvcc >/dev/null; then
      # The toolkit is installed but not on PATH: point CMake (and the
      # compute-sanitizer search of scripts/gpu_check_lib) at it.
      for root in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
        if [[ -n $root && -x $root/bin/nvcc ]]; then export CUDACXX=$root/bin/nvcc PATH=$root/bin:$PATH; break; fi
      done
    fi
  fi
  if [[ ! -f $build_dir/CMakeCache.txt ]] && command -v ninja >/dev/null; then
    args+=(-G Ninja)
  fi

  local t=$SECONDS
  "$cmake" "${args[@]}" || { echo "gpu_check.sh: CMake configuration failed" >&2; return 2; }
  "$cmake" --build "$build_dir" --parallel "$(nproc 2>/dev/null || echo 4)" \
    || { echo "gpu_check.sh: build failed" >&2; return 2; }
  echo "== gpu_check.sh: kernel module built in $((SECONDS - t)) s"

  GPU_CHECK_T0=$started PYTHONUNBUFFERED=1 PYTHONPATH="$repo/scripts${PYTHONPATH:+:$PYTHONPATH}" \
    "$python_exe" -m gpu_check_lib --build-dir "$build_dir" "${py_args[@]}"
}

if [[ -n ${OUT:-} ]]; then
  mkdir -p "$OUT"
  set +e
  run 2>&1 | tee "$OUT/gpu_check.log"
  status=${PIPESTATUS[0]}
  set -e
else
  set +e
  run
  status=$?
  set -e
fi
echo "== gpu_check.sh: exit status $status after $(( $(date +%s) - started )) s"
exit "$status"
