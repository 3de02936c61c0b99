#!/usr/bin/env bash
# The training claims on an emulated CPU without AVX-512, for a developer whose
# machines all have it: the `claims` tests, and with --blobs the blobs
# comparison's exit status, run under qemu's user-mode emulation of an AMD EPYC
# with AVX2 only (default -cpu EPYC-Milan).
#
#   scripts/emulated_cpu_claims.sh [--cpu MODEL] [--blobs] [PYTHON]
#
# PYTHON (default: python3) must have the package and its test extras
# installed (pip install ".[test]"). Needs qemu-x86_64 (Debian's qemu-user or
# qemu-user-static). Not run by CI: emulation is about 12 times slower than the
# host (on a 2-core Xeon: the claims 11-17 minutes, --blobs about 50 more).
#
# oneDNN reads the emulated CPUID and runs its AVX2 code, as on such a machine;
# this script checks that it says so before it runs anything long. qemu's
# arithmetic is not bit for bit the silicon's (its vrcpps is exact, a CPU's an
# approximation), so this is one more rounding path that a claim has to
# survive, not the AVX2 machine itself (docs/development.md has what each path
# gave).
set -euo pipefail

cpu=EPYC-Milan
blobs=0
python=python3
while (($#)); do
  case "$1" in
    --cpu)
      cpu="${2:?--cpu needs a qemu CPU model, e.g. EPYC-Milan or Haswell-v4 (qemu-x86_64 -cpu help lists them)}"
      shift 2
      ;;
    --blobs)
      blobs=1
      shift
      ;;
    -h | --help)
      sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    -*)
      echo "emulated_cpu_claims.sh: unknown option $1 (accepted: --cpu MODEL, --blobs, PYTHON)" >&2
      exit 2
      ;;
    *)
      python="$1"
      shift
      ;;
  esac
done

qemu=$(command -v qemu-x86_64 || command -v qemu-x86_64-static || true)
if [[ -z "$qemu" ]]; then
  echo "emulated_cpu_claims.sh: no qemu-x86_64 or qemu-x86_64-static; install one: apt install qemu-user" >&2
  exit 2
fi
# Read whole (grep -q would close the pipe early, which pipefail calls a failure); qemu exits 1 after listing.
models=$("$qemu" -cpu help || true)
if ! grep -qw -- "$cpu" <<<"$models"; then
  echo "emulated_cpu_claims.sh: qemu does not know the CPU model '$cpu' (qemu-x86_64 -cpu help lists them)" >&2
  exit 2
fi
python=$(command -v "$python") || {
  echo "emulated_cpu_claims.sh: no Python '$python'" >&2
  exit 2
}
cd "$(dirname "$0")/.."
run() { "$qemu" -cpu "$cpu" "$python" "$@"; }
# qemu's TCG warns once per CPU feature it cannot emulate; those lines say nothing about the run.
quiet() { grep -v "TCG doesn't support" || true; }

echo "== the emulated CPU: $cpu (what oneDNN and grad_reverse dispatch to)"
isa=$(ONEDNN_VERBOSE=1 TF_CPP_MIN_LOG_LEVEL=2 run -c \
  "import tensorflow as tf; tf.linalg.matmul(tf.ones((8, 8)), tf.ones((8, 8)))" 2>&1 |
  sed -n 's/^onednn_verbose,.*,info,cpu,isa://p' | head -n 1 || true)
echo "oneDNN: ${isa:-nothing reported}"
if [[ -z "$isa" || "$isa" == *AVX-512* ]]; then
  echo "emulated_cpu_claims.sh: oneDNN did not report an ISA without AVX-512 under -cpu $cpu" >&2
  exit 1
fi
TF_CPP_MIN_LOG_LEVEL=2 run -m grad_reverse info 2>&1 | quiet | grep "^cpu_path" || true

echo "== the claims tests under -cpu $cpu"
status=0
run -m pytest -q -p no:cacheprovider -m claims tests 2>&1 | quiet | tail -n 25 || status=1

if ((blobs)); then
  echo "== demo --problem blobs under -cpu $cpu (exit status: its claims)"
  out=$(mktemp -d)
  TF_CPP_MIN_LOG_LEVEL=2 run -m grad_reverse demo --problem blobs --out "$out" 2>&1 | quiet |
    sed -n '/target accuracy over/,/^$/p;/^demo: FAIL/p' || status=1
  rm -rf "$out"
fi
exit "$status"
