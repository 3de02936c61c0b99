#!/usr/bin/env bash
# Makes ROOT, a minimal Debian root of SUITE (forky by default) with CPython
# VERSION, its venv module and its headers, and writes WRAPPER: an executable
# that runs that interpreter on this machine without entering the root:
#
#   scripts/debian_python.sh ROOT VERSION WRAPPER [SUITE]
#   WRAPPER -c 'import sysconfig; print(sysconfig.get_paths()["include"])'
#
# Why: a Python newer than this machine's distribution (3.14 on a Debian
# bookworm host) is Debian's own package in a newer suite, built against that
# suite's C library. The wrapper starts it through the root's dynamic loader
# with the root's libraries, so it needs no chroot and no root privileges
# once the root exists, and Python finds its prefix from its own path
# (ROOT/usr): its headers and standard library are named as this machine
# sees them, which is all build_pip_pkg.sh asks of a Python it builds the
# kernel module for (version, include folder, module suffix). The wrapper is
# for building; tests run inside the root with chroot, where the Python's
# subprocesses find the same C library (scripts/debian_root_tests.sh).
#
# Needs debootstrap and root privileges to make ROOT (skipped when ROOT
# already has the interpreter). Debian's debootstrap names a suite newer than
# itself by the script of "sid", which fits every later suite.
set -euo pipefail
usage="usage: debian_python.sh ROOT VERSION WRAPPER [SUITE]"
root=${1:?$usage}
version=${2:?$usage}
wrapper=${3:?$usage}
suite=${4:-forky}
if [ ! -x "$root/usr/bin/python$version" ]; then
  command -v debootstrap >/dev/null || { echo "debian_python.sh: debootstrap not found (apt-get install debootstrap)" >&2; exit 1; }
  script=/usr/share/debootstrap/scripts/$suite
  [ -e "$script" ] || script=/usr/share/debootstrap/scripts/sid
  # binutils: the tests that run in the root read ELF symbols with readelf.
  debootstrap --variant=minbase \
    --include="python$version,python$version-venv,python$version-dev,ca-certificates,binutils" \
    "$suite" "$root" http://deb.debian.org/debian "$script"
fi
root=$(cd "$root" && pwd)
shopt -s nullglob
loaders=("$root"/usr/lib64/ld-linux-*.so.* "$root"/usr/lib/ld-linux-*.so.*)
multiarch=("$root"/usr/lib/*-linux-gnu)
[ ${#loaders[@]} -gt 0 ] && [ ${#multiarch[@]} -gt 0 ] ||
  { echo "debian_python.sh: no dynamic loader or multiarch folder in $root" >&2; exit 1; }
loader=${loaders[0]}
mkdir -p "$(dirname "$wrapper")"
cat > "$wrapper.tmp" <<WRAPPER
#!/bin/sh
# Written by scripts/debian_python.sh: Debian's CPython $version from $(basename "$root"), with its own C library.
exec "$loader" --library-path "${multiarch[0]}" "$root/usr/bin/python$version" "\$@"
WRAPPER
chmod +x "$wrapper.tmp"
mv "$wrapper.tmp" "$wrapper"
python3 "$(dirname "$0")/../build_tools/find_python.py" --with-headers "$wrapper" >/dev/null ||
  { echo "debian_python.sh: $wrapper runs, but finds no Python.h" >&2; exit 1; }
