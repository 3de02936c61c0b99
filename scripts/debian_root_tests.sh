#!/usr/bin/env bash
# Runs tests against a wheel inside a Debian root, entered with chroot: the
# root's C library, C++ library and Python, nothing of this machine's.
#
#   sudo scripts/debian_root_tests.sh ROOT PYTHON REQUIREMENT WHEEL LOG [TEST ...]
#
# ROOT: a Debian root with PYTHON (an interpreter name inside it, such as
# python3 or python3.14) and its venv module: scripts/old_system_check.sh
# makes a bullseye one, scripts/debian_python.sh a forky one.
# REQUIREMENT: the TensorFlow to install (a pip requirement such as
# "tensorflow-cpu==2.15.*"). TEST: test files or folders (default: tests).
# A virtual environment in the root (/opt/venv-PYTHON, kept and reused) gets
# that TensorFlow, the wheel and the test packages (no compiler, no CMake:
# tests that need one skip and say so); the tests run with -m 'not slow'.
# Prints the Python, TensorFlow and `python -m grad_reverse info`'s library
# and CPU path, writes pytest's output to LOG and exits with pytest's status.
# GRAD_REVERSE_IGNORE_REQUIRES_PYTHON=1 installs the wheel on a Python below
# its Requires-Python (a check of the system's libraries, not of Python).
#
# Needs root privileges (chroot, mounts).
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: debian_root_tests.sh ROOT PYTHON REQUIREMENT WHEEL LOG [TEST ...]"
root=$(cd "${1:?$usage}" && pwd)
python=${2:?$usage}
requirement=${3:?$usage}
wheel=$(realpath "${4:?$usage}")
log=$(realpath "${5:?$usage}")
shift 5
tests=("${@:-tests}")
[ -x "$root/usr/bin/$python" ] || { echo "debian_root_tests.sh: $root has no /usr/bin/$python" >&2; exit 2; }
venv=/opt/venv-$python

mounted=()
cleanup() { for m in "${mounted[@]}"; do umount "$m" || true; done; }
trap cleanup EXIT
for fs in proc dev; do
  if ! mountpoint -q "$root/$fs"; then
    if [ "$fs" = proc ]; then mount -t proc proc "$root/proc"; else mount --bind /dev "$root/dev"; fi
    mounted+=("$root/$fs")
  fi
done
# This machine's certificate bundle and resolver: pip in the root downloads
# through the same network.
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/etc/ssl/certs"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/build-host-ca.crt"

rm -rf "$root/src" && mkdir -p "$root/src"
cp -r tests build_tools scripts docs README.md pyproject.toml "$root/src/"
cp "$wheel" "$root/src/"
inside() {
  chroot "$root" /usr/bin/env -i PATH="$venv/bin:/usr/bin:/bin" HOME=/root \
    PIP_CERT=/etc/ssl/certs/build-host-ca.crt TF_CPP_MIN_LOG_LEVEL=2 \
    GRAD_REVERSE_EXPECT_PORTABLE=1 "$@"
}
# A new pip once, when the environment is made; a reused one already has it.
inside bash -c "[ -x $venv/bin/python ] || { /usr/bin/$python -m venv $venv && pip install -q --upgrade pip; }"
inside pip install -q "$requirement" pytest hypothesis matplotlib
ignore=()
[ "${GRAD_REVERSE_IGNORE_REQUIRES_PYTHON:-0}" = 1 ] && ignore=(--ignore-requires-python)
inside pip install -q --force-reinstall --no-deps "${ignore[@]}" "/src/$(basename "$wheel")"
echo "debian_root_tests.sh: $(inside ldd --version | head -n 1); $(inside python -c 'import platform, tensorflow as tf; print("Python", platform.python_version(), "TensorFlow", tf.__version__)' 2>/dev/null | tail -n 1)"
inside python -m grad_reverse info 2>/dev/null | grep -E '^(tensorflow_running|library_kind|cpu_path) ' | sed 's/^/debian_root_tests.sh: info /'
status=0
inside bash -c "cd /src && python -m pytest -q -p no:cacheprovider -m 'not slow' -rs ${tests[*]}" > "$log" 2>&1 || status=$?
tail -n 30 "$log"
summary=$(grep -E "[0-9]+ (passed|failed|error)" "$log" | tail -n 1 || true)
echo "debian_root_tests.sh: pytest exit status $status: ${summary:-no summary line} (log: $log)"
exit $status
