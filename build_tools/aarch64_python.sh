#!/usr/bin/env bash
# Runs CPython 3.11 for Linux aarch64 from ROOT (build_tools/emulated_root.sh)
# under qemu's user-mode emulation, on an x86-64 machine:
#
#   build_tools/aarch64_python.sh ROOT [python arguments...]
#
# PYTHONPATH passes through: a `pip install --target` folder of aarch64
# wheels (TensorFlow, the grad-reverse wheel) is how packages get in.
# qemu's default CPU ("max") has every Armv8/v9 feature a wheel may ask for;
# OpenBLAS (numpy's) would detect it as an SME core and print spurious
# floating-point warnings, so it is told to use its plain Armv8 kernels.
set -euo pipefail
root=${1:?usage: aarch64_python.sh ROOT [python arguments...]}
shift
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-ARMV8}
exec qemu-aarch64-static -L "$root" "$root/usr/bin/python3.11" "$@"
