#!/usr/bin/env bash
# Tries grad-reverse's wheel on the newest tf-nightly, on demand: will the
# next TensorFlow release work on the day it ships?
#
#   scripts/nightly_canary.sh [WHEEL] [TEST ...]
#
# In a fresh virtual environment under build-canary/: the newest tf-nightly
# (`pip install --pre tf-nightly`: whatever PyPI has today, unlike CI's
# pinned build_tools/tf_nightly.txt), the wheel (default: the x86-64 wheel in
# dist/) and its test extra, then the op's tests with no compiler, CMake or
# nvcc on PATH, once as the loader chooses (auto: the stable-ABI library,
# with its warning) and once forced to the stable library. When it passes,
# bump build_tools/tf_nightly.txt to the version it prints, in a commit.
# Exit status: pytest's.
set -euo pipefail
cd "$(dirname "$0")/.."
wheel=${1:-$(ls dist/grad_reverse-*_x86_64.whl)}
shift || true
tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
  tests=(tests/op/test_op.py tests/op/test_lambda_input.py tests/op/test_nonfinite_lambda.py tests/op/test_layer.py
         tests/op/test_loader.py tests/op/test_stable_library.py tests/serving/test_serving_make_servable.py)
fi
work=$PWD/build-canary
rm -rf "$work"
mkdir -p "$work"
python=${PYTHON:-python3}
"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install -q --upgrade pip
"$work/venv/bin/pip" install -q --pre tf-nightly
nightly=$("$work/venv/bin/python" -c "import importlib.metadata as m; print(m.version('tf-nightly'))")
echo "nightly_canary.sh: tf-nightly $nightly"
bare_path=$("$python" scripts/no_compiler_path.py "$work/bin" "$work/venv/bin")
PATH=$bare_path "$work/venv/bin/pip" install -q "$wheel[test]"
status=0
for library in auto stable; do
  echo "nightly_canary.sh: GRAD_REVERSE_LIBRARY=$library"
  PATH=$bare_path GRAD_REVERSE_LIBRARY=$library TF_CPP_MIN_LOG_LEVEL=2 \
    "$work/venv/bin/python" -m pytest -q -p no:cacheprovider -m "not slow" -rs "${tests[@]}" || status=$?
done
echo "nightly_canary.sh: tf-nightly $nightly: $([ $status -eq 0 ] && echo passed || echo FAILED)" \
     "(pin it with: echo \"tf-nightly==$nightly\" > build_tools/tf_nightly.txt)"
exit $status
