#!/usr/bin/env bash
# Runs the op's tests on Linux aarch64, on this x86-64 machine, under qemu's
# user-mode emulation: the aarch64 wheel (GRAD_REVERSE_WHEEL_CPU=aarch64
# ./build_pip_pkg.sh) installed with pip next to TensorFlow's aarch64 wheel of
# each RELEASE, in the emulated CPython 3.11 of build_tools/emulated_root.sh,
# with no compiler, CMake or nvcc on PATH. One pytest process per release:
# under emulation TensorFlow's import alone takes about 20 s.
#
#   scripts/aarch64_emulated_tests.sh WHEEL [RELEASE ...]    (default: 2.21)
#
# GRAD_REVERSE_AARCH64_TESTS overrides the test files (space-separated; the
# default below, docs/building.md says why these). Logs go to
# build-aarch64-tests/<release>.log (GRAD_REVERSE_AARCH64_TESTS_DIR: another folder); the script prints one line per release
# and exits 1 when a release's run fails or its tests did not all pass.
set -euo pipefail
cd "$(dirname "$0")/.."
wheel=$(cd "$(dirname "${1:?usage: aarch64_emulated_tests.sh WHEEL [RELEASE ...]}")" && pwd)/$(basename "$1")
shift
releases=("${@:-2.21}")
python=${PYTHON:-python3}
# What the op promises, each where it is tested on x86-64: forward and
# backward bitwise against the pure-Python version in the four dtypes, float
# and Variable lambda, both backward modes and second order (test_op,
# test_backward, test_backward_modes_and_stock, test_lambda_input,
# test_nonfinite_lambda); XLA (test_xla);
# the Keras layer in fit and its SavedModel round trip (test_layer); the
# make-servable rewrite (test_serving_make_servable); the wheel's loader,
# symbols, kernel module and CPU (test_loader, test_symbols,
# test_kernels_module, test_machine).
tests=${GRAD_REVERSE_AARCH64_TESTS:-tests/packaging/test_machine.py tests/op/test_op.py tests/op/test_backward.py \
tests/op/test_backward_modes_and_stock.py tests/op/test_lambda_input.py tests/op/test_nonfinite_lambda.py \
tests/op/test_xla.py tests/op/test_layer.py \
tests/serving/test_serving_make_servable.py tests/op/test_loader.py tests/packaging/test_symbols.py tests/op/test_kernels_module.py}
# Two runs at once need two folders (GRAD_REVERSE_AARCH64_TESTS_DIR).
work=${GRAD_REVERSE_AARCH64_TESTS_DIR:-build-aarch64-tests}
mkdir -p "$work" && work=$(cd "$work" && pwd)
start=$SECONDS

root=$(build_tools/emulated_root.sh "$PWD/build-wheel/aarch64/root")
# pip and pytest (pure Python) for the emulated interpreter; then the wheel,
# installed once for all releases by pip running in that interpreter, so pip
# judges the wheel's tags as on an aarch64 machine (glibc, CPU), and with no
# compiler on PATH.
[ -d "$work/pip/pip" ] || "$python" -m pip install -q --target "$work/pip" "pip>=23"
[ -d "$work/pytest/pytest" ] || "$python" -m pip install -q --target "$work/pytest" "pytest>=7"
no_compiler=$("$python" scripts/no_compiler_path.py "$work/no-compiler")
build_tools/aarch64_python.sh "$root" "$work/bin/python-pip" "$work/pip"
rm -rf "$work/wheel"
began=$SECONDS
PATH=$no_compiler "$work/bin/python-pip" -m pip install -q --disable-pip-version-check --no-deps --no-index \
  --target "$work/wheel" "$wheel"
echo "aarch64 (emulated) pip install of $(basename "$wheel"): $((SECONDS - began)) s"

failed=0
for release in "${releases[@]}"; do
  site=$PWD/build-wheel/aarch64/tensorflow/$release
  tensorflow=$(PYTHON=$python build_tools/aarch64_tensorflow.sh "$release" "$site")
  interpreter=$work/bin/python-tf$release
  build_tools/aarch64_python.sh "$root" "$interpreter" "$work/wheel" "$work/pytest" "$site"
  log=$work/$release.log
  began=$SECONDS
  # shellcheck disable=SC2086  # one word per test file
  if PATH=$no_compiler GRAD_REVERSE_EXPECT_MACHINE=aarch64 GRAD_REVERSE_EXPECT_PORTABLE=1 GRAD_REVERSE_EXPECT_CUDA=0 \
      "$interpreter" -m pytest -q -p no:cacheprovider -m "not slow" -rs --durations=10 $tests > "$log" 2>&1; then
    result=passed
  else
    result=FAILED
    failed=1
  fi
  summary=$(grep -E '[0-9]+ (passed|failed|errors?|skipped)' "$log" | tail -n 1 | tr -d '=' | xargs)
  echo "aarch64 (emulated) $tensorflow: $result, ${summary:-no test ran} ($((SECONDS - began)) s; $log)"
done
echo "aarch64_emulated_tests.sh: $((SECONDS - start)) s"
exit $failed
