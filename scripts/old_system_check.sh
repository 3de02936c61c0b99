#!/usr/bin/env bash
# Runs the test suite against a portable wheel on an older Linux than the one
# that built it: a Debian bullseye root (glibc 2.31, libstdc++ 10, Python 3.9)
# made with debootstrap, entered with chroot. Nothing of the build machine's
# libraries is visible there, so a library that needs a newer glibc or
# libstdc++ symbol fails to load.
#
#   sudo scripts/old_system_check.sh WHEEL [RELEASE [TEST ...]]
#
# RELEASE: 2.15 by default; TEST: test files or folders (default: tests).
#
# Needs root (debootstrap, chroot, mounts) and debootstrap (apt-get install
# debootstrap). The root is kept in build-old-system/ and reused;
# scripts/debian_root_tests.sh installs tensorflow-cpu RELEASE there (one
# that publishes wheels for Python 3.9: 2.15 to 2.20), the wheel and the test
# packages, writes the pytest output to build-old-system/tests-RELEASE.log and
# exits with pytest's status.
set -euo pipefail
cd "$(dirname "$0")/.."
wheel=$(realpath "${1:?usage: old_system_check.sh WHEEL [RELEASE]}")
release=${2:-2.15}
shift $(($# < 2 ? $# : 2))
tests=("${@:-tests}")
work=$PWD/build-old-system
root=$work/root
mkdir -p "$work"

if [ ! -x "$root/usr/bin/python3" ]; then
  debootstrap --variant=minbase --include=python3,python3-venv,binutils \
    bullseye "$root" http://deb.debian.org/debian
fi
# Bullseye's Python 3.9 is below the package's Requires-Python: this check is
# about the system's C and C++ libraries, so pip is told to install anyway.
GRAD_REVERSE_IGNORE_REQUIRES_PYTHON=1 scripts/debian_root_tests.sh "$root" python3 "tensorflow-cpu==$release.*" \
  "$wheel" "$work/tests-$release.log" "${tests[@]}"
