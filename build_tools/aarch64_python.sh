#!/usr/bin/env bash
# Writes WRAPPER: an executable that runs CPython 3.11 for Linux aarch64 from
# ROOT (build_tools/emulated_root.sh) under qemu's user-mode emulation, on
# an x86-64 machine, with the SITE folders (`pip install --target` folders of
# aarch64 wheels: TensorFlow, the grad-reverse wheel, pytest) on its path:
#
#   build_tools/aarch64_python.sh ROOT WRAPPER [SITE ...]
#   WRAPPER -c 'import tensorflow'
#
# The wrapper is the interpreter's own sys.executable (qemu's -0 gives
# Python its name as argv[0]), so what the code under test starts with
# sys.executable (a subprocess, a CLI run) is emulated too. Python then
# finds its standard library at its built-in prefix, /usr, which qemu's -L
# resolves inside ROOT first; it names its headers as /usr/include/python3.11
# (so a build prefixes ROOT itself: GRAD_REVERSE_PYTHON_ROOT).
# qemu's default CPU ("max") has every Armv8/v9 feature a wheel may ask for;
# OpenBLAS (numpy's) would detect it as an SME core and print spurious
# floating-point warnings, so it is told to use its plain Armv8 kernels.
set -euo pipefail
root=$(cd "${1:?usage: aarch64_python.sh ROOT WRAPPER [SITE ...]}" && pwd)
wrapper=${2:?usage: aarch64_python.sh ROOT WRAPPER [SITE ...]}
shift 2
path=""
for site in "$@"; do
  path=${path:+$path:}$(cd "$site" && pwd)
done
qemu=$(command -v qemu-aarch64-static) || { echo "aarch64_python.sh: qemu-aarch64-static not found (apt-get install qemu-user-static)" >&2; exit 1; }
mkdir -p "$(dirname "$wrapper")"
cat > "$wrapper.tmp" <<WRAPPER
#!/bin/sh
# Written by build_tools/aarch64_python.sh: aarch64 CPython 3.11 under qemu.
export PYTHONPATH="$path\${PYTHONPATH:+:\$PYTHONPATH}"
export OPENBLAS_CORETYPE="\${OPENBLAS_CORETYPE:-ARMV8}"
exec "$qemu" -L "$root" -0 "\$0" "$root/usr/bin/python3.11" "\$@"
WRAPPER
chmod +x "$wrapper.tmp"
mv "$wrapper.tmp" "$wrapper"
