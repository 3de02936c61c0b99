#!/usr/bin/env bash
# Builds the grad-reverse wheel into DIST_DIR (default: dist/).
#
# The wheel holds the compiled op library (CPU, plus CUDA when nvcc is found,
# plus XLA) and is tagged for this platform and Python. Its metadata pins the
# TensorFlow it was compiled against, by distribution name and exact version:
# `tensorflow==X` or `tensorflow-cpu==X`, whichever the build used (see
# build_tools/tensorflow_requirement.py). Choose with GRAD_REVERSE_TENSORFLOW,
# e.g. GRAD_REVERSE_TENSORFLOW=tensorflow-cpu==2.21.0 ./build_pip_pkg.sh;
# by default it follows the TensorFlow of the Python running this script, if
# any. A custom op is ABI-bound to one TensorFlow version, so a wheel is too.
#
# Usage: ./build_pip_pkg.sh [DIST_DIR]     (PYTHON=python3.X to pick the interpreter)
set -euo pipefail
cd "$(dirname "$0")"
dist_dir=$(mkdir -p "${1:-dist}" && cd "${1:-dist}" && pwd)
python=${PYTHON:-python3}

"$python" -m pip wheel --no-deps --wheel-dir "$dist_dir" .
wheel=$(ls -t "$dist_dir"/grad_reverse-*.whl | head -n 1)
echo "built $wheel"
"$python" - "$wheel" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    names = wheel.namelist()
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    requires = [line for line in wheel.read(metadata).decode().splitlines() if line.startswith("Requires-Dist")]
    missing = [f for f in ("grad_reverse/_grad_reverse_ops.so", "grad_reverse/_build_info.json") if f not in names]
if missing:
    sys.exit(f"the wheel lacks {missing}")
print("\n".join(requires))
PY
