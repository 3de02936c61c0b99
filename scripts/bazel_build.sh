#!/usr/bin/env bash
# Builds the Bazel targets of BUILD against the pip TensorFlow of $PYTHON
# (default: python3), offline, with Debian's bazel-bootstrap (4.2.3), and
# proves them:
#   1. //:_grad_reverse_ops.so loads into that Python (tf.load_op_library,
#      without the grad_reverse package) and passes a smoke test: forward is
#      the identity, backward -lambda*dy, a non-finite lambda is rejected;
#   2. a workspace set up like TF Serving's (docs/bazel.md: our repository
#      as @grad_reverse with repo_mapping {"@grad_reverse_tf": "@org_tensorflow"})
#      links //:grad_reverse_ops statically into the SavedModel runner of
#      cc/tools, which then runs a SavedModel holding GradReverse without
#      loading any op library, as a tensorflow_model_server built with the op
#      does. Skip it with --no-serving-check.
# Install Bazel first: apt-get install -y bazel-bootstrap
set -euo pipefail

serving_check=1
for arg in "$@"; do
  case "$arg" in
    --no-serving-check) serving_check=0 ;;
    *) echo "usage: $0 [--no-serving-check]" >&2; exit 2 ;;
  esac
done

repo=$(cd "$(dirname "$0")/.." && pwd)
python=$(command -v "${PYTHON:-python3}") || { echo "bazel_build.sh: ${PYTHON:-python3} not found" >&2; exit 1; }
# Bazel runs the repository rule elsewhere: make the path absolute, without
# resolving symlinks (a virtual environment's python is one).
case "$python" in /*) ;; *) python="$PWD/$python" ;; esac
command -v bazel >/dev/null || {
  echo "bazel_build.sh: no bazel on PATH; install it with: apt-get install -y bazel-bootstrap" >&2
  exit 1
}
"$python" -c "import tensorflow" 2>/dev/null || {
  echo "bazel_build.sh: $python cannot import tensorflow" >&2
  exit 1
}
export TF_CPP_MIN_LOG_LEVEL=2
# The repository rule asks this interpreter where TensorFlow is (WORKSPACE).
bazel_flags=(--repo_env=PYTHON_BIN_PATH="$python" -c opt)
work=$(mktemp -d)
cleanup() {
  # The serving check's Bazel server lives in $work; stop it before removing it.
  if [ -d "$work/output_base" ]; then
    bazel --output_base="$work/output_base" shutdown 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

cd "$repo"
start=$SECONDS
bazel build "${bazel_flags[@]}" //:_grad_reverse_ops.so //:grad_reverse_ops
echo "bazel_build.sh: built //:_grad_reverse_ops.so and //:grad_reverse_ops in $((SECONDS - start)) s"
# The server would idle for hours holding memory; the build cache stays on disk.
bazel shutdown

"$python" - "$repo/bazel-bin/_grad_reverse_ops.so" "$work/saved_model" <<'PY'
import sys

import numpy as np
import tensorflow as tf

library_path, export_dir = sys.argv[1:3]
# The package would load its own build of the same ops; this tests Bazel's.
assert "grad_reverse" not in sys.modules
library = tf.load_op_library(library_path)
if not hasattr(library, "grad_reverse"):
    sys.exit(f"bazel_build.sh: FAIL: {library_path} registers no GradReverse op "
             "(without alwayslink the linker drops the registration objects)")


@tf.RegisterGradient("GradReverse")
def _reverse(op, dy):
    return [library.grad_reverse_grad(dy, op.inputs[1]), None]


x64 = np.array([[1.5, -2.0, 0.0], [3.0, -0.5, 7.0]])
weights64 = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
for dtype in (tf.float16, tf.bfloat16, tf.float32, tf.float64):
    x, weights = tf.constant(x64, dtype), tf.constant(weights64, dtype)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = library.grad_reverse(x, tf.constant(0.5))
        loss = tf.reduce_sum(y * weights)
    dx = tape.gradient(loss, x)
    # Exact in every dtype: small integers times 0.5.
    np.testing.assert_array_equal(tf.cast(y, tf.float64).numpy(), x64, err_msg=f"forward {dtype.name}")
    np.testing.assert_array_equal(
        tf.cast(dx, tf.float64).numpy(), -0.5 * weights64, err_msg=f"backward {dtype.name}"
    )
try:
    library.grad_reverse(tf.constant([1.0]), tf.constant(float("nan")))
except tf.errors.InvalidArgumentError as error:
    assert "finite" in str(error), error
else:
    raise AssertionError("a NaN lambda was accepted")


class Doubler(tf.Module):
    # autograph=False: AutoGraph wants the source file, and stdin has none.
    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)], autograph=False)
    def serve(self, x):
        return {"y": 2.0 * library.grad_reverse(x, tf.constant(1.0))}


module = Doubler()
tf.saved_model.save(module, export_dir, signatures={"serving_default": module.serve})
print(f"bazel_build.sh: smoke test passed: {library_path} loads into TensorFlow {tf.__version__}; "
      "forward identity, backward -lambda*dy (half, bfloat16, float, double); NaN lambda rejected")
PY

[ "$serving_check" = 1 ] || exit 0

# A workspace wired the way docs/bazel.md wires TF Serving's: our source
# tree under third_party_ops/ (linked here; copied there), hidden from the
# main workspace by .bazelignore, declared as @grad_reverse with repo_mapping.
# The pip TensorFlow stands in for TF Serving's @org_tensorflow source tree
# (the generated repository has the same //tensorflow/core:framework label).
consumer="$work/consumer"
mkdir -p "$consumer/third_party_ops"
ln -s "$repo" "$consumer/third_party_ops/grad-reverse"
echo "third_party_ops" >"$consumer/.bazelignore"
cat >"$consumer/WORKSPACE" <<EOF
workspace(name = "serving_like")

local_repository(name = "rules_cc", path = "third_party_ops/grad-reverse/bazel/rules_cc")

local_repository(name = "rules_java", path = "third_party_ops/grad-reverse/bazel/rules_java")

local_repository(
    name = "grad_reverse",
    path = "third_party_ops/grad-reverse",
    repo_mapping = {"@grad_reverse_tf": "@org_tensorflow"},
)

load("@grad_reverse//bazel:pip_tensorflow.bzl", "pip_tensorflow")

pip_tensorflow(name = "org_tensorflow")
EOF
cat >"$consumer/BUILD" <<'EOF'
# Like tensorflow_model_server: the SavedModel loader with the op linked in
# statically through the alwayslink library (SUPPORTED_TENSORFLOW_OPS).
cc_binary(
    name = "runner_with_op",
    srcs = ["@grad_reverse//:cc/tools/saved_model_runner.cc"],
    # libtensorflow_cc registers the Session and the stock kernels from
    # static initializers only (see cc/tools/CMakeLists.txt).
    linkopts = ["-Wl,--no-as-needed"],
    deps = [
        "@grad_reverse//:grad_reverse_ops",
        "@org_tensorflow//:libtensorflow_cc",
        "@org_tensorflow//tensorflow/core:framework",
    ],
)
EOF
cp "$repo/.bazelrc" "$consumer/.bazelrc"
cd "$consumer"
start=$SECONDS
# Its own output base, removed with $work: the path changes every run.
bazel --output_base="$work/output_base" build "${bazel_flags[@]}" //:runner_with_op
echo "bazel_build.sh: built the TF Serving-style runner in $((SECONDS - start)) s"
status=0
output=$(./bazel-bin/runner_with_op "$work/saved_model" x=2,3:1,2,3,4,5,-6) || status=$?
echo "$output"
expected='{"output": "y", "dtype": "float", "shape": [2, 3], "values": [2, 4, 6, 8, 10, -12]}'
if [ "$status" != 0 ] || [ "$output" != "$expected" ]; then
  echo "bazel_build.sh: FAIL: the runner with //:grad_reverse_ops linked in exited $status and printed the above;" \
    "expected $expected" >&2
  exit 1
fi
echo "bazel_build.sh: OK: a SavedModel holding GradReverse runs in a loader with //:grad_reverse_ops linked in statically, no op library loaded"
