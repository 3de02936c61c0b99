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
# debootstrap). The root is kept in build-old-system/ and reused; its
# virtual environment gets tensorflow-cpu RELEASE (one that publishes wheels
# for Python 3.9: 2.15 to 2.20), the wheel, and the test packages (no
# compiler, no CMake: tests that need one skip and say so). Writes the pytest
# output to build-old-system/tests-RELEASE.log and exits with pytest's status.
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
mounted=()
cleanup() { for m in "${mounted[@]}"; do umount "$m" || true; done; }
trap cleanup EXIT
for fs in proc dev; do
  if ! mountpoint -q "$root/$fs"; then
    if [ "$fs" = proc ]; then mount -t proc proc "$root/proc"; else mount --bind /dev "$root/dev"; fi
    mounted+=("$root/$fs")
  fi
done
# The build machine's certificate bundle and resolver: pip in the root
# downloads through the same network.
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/build-host-ca.crt"

rm -rf "$root/src" && mkdir -p "$root/src"
cp -r tests build_tools scripts docs README.md pyproject.toml "$root/src/"
cp "$wheel" "$root/src/"
inside() {
  chroot "$root" /usr/bin/env -i PATH=/opt/venv/bin:/usr/bin:/bin HOME=/root \
    PIP_CERT=/etc/ssl/certs/build-host-ca.crt TF_CPP_MIN_LOG_LEVEL=2 \
    GRAD_REVERSE_EXPECT_PORTABLE=1 "$@"
}
inside bash -c "python3 -m venv /opt/venv && pip install -q --upgrade pip"
inside pip install -q "tensorflow-cpu==$release.*" pytest hypothesis matplotlib
# Bullseye's Python 3.9 is below the package's Requires-Python: this check is
# about the system's C and C++ libraries, so pip is told to install anyway.
inside pip install -q --force-reinstall --no-deps --ignore-requires-python "/src/$(basename "$wheel")"
echo "old_system_check.sh: $(inside ldd --version | head -n 1); $(inside python -c 'import platform, tensorflow as tf; print("Python", platform.python_version(), "TensorFlow", tf.__version__)' 2>/dev/null | tail -n 1)"
status=0
inside bash -c "cd /src && python -m pytest -q -p no:cacheprovider -m 'not slow' -rs ${tests[*]}" \
  > "$work/tests-$release.log" 2>&1 || status=$?
tail -n 30 "$work/tests-$release.log"
echo "old_system_check.sh: pytest exit status $status (log: $work/tests-$release.log)"
exit $status
