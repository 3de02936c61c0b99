#!/usr/bin/env bash
# Makes ROOT: a Debian bookworm root for Linux aarch64 with CPython 3.11 and
# its headers, in which this x86-64 machine runs aarch64 Python under qemu's
# user-mode emulation (build_tools/aarch64_python.sh), with no binfmt_misc
# and no native aarch64 hardware.
#
#   build_tools/emulated_root.sh ROOT
#
# prints ROOT; a root already complete is reused. Needs debootstrap and
# qemu-user-static (apt). debootstrap --foreign only downloads the packages
# (its second stage would have to run aarch64 code, which needs binfmt_misc);
# unpacking every downloaded package with dpkg-deb -x gives a root in which
# CPython runs. Python 3.11: the one every TensorFlow from 2.15 to 2.21 has an
# aarch64 wheel for. GRAD_REVERSE_DEBIAN_MIRROR names another Debian mirror.
set -euo pipefail
root=${1:?usage: emulated_root.sh ROOT}
mirror=${GRAD_REVERSE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# python3-distutils: TensorFlow 2.16's import reaches distutils.spawn, which
# Debian ships apart from the standard library.
packages=python3.11,libpython3.11-dev,python3-distutils,ca-certificates
marker=$root/.grad-reverse-emulated-root
# A root made with another package list is made again.
if [ "$(head -n 1 "$marker" 2>/dev/null)" = "$packages" ]; then echo "$root"; exit 0; fi
for tool in debootstrap dpkg-deb qemu-aarch64-static; do
  command -v "$tool" >/dev/null || { echo "emulated_root.sh: $tool not found (apt-get install debootstrap qemu-user-static)" >&2; exit 1; }
done
rm -rf "$root"
mkdir -p "$root"
debootstrap --foreign --arch=arm64 --variant=minbase \
  --include="$packages" bookworm "$root" "$mirror" >&2
for deb in "$root"/var/cache/apt/archives/*.deb; do
  dpkg-deb -x "$deb" "$root"
done
rm -f "$root"/var/cache/apt/archives/*.deb
# The check that the root works: aarch64 CPython starts under emulation.
qemu-aarch64-static -L "$root" "$root/usr/bin/python3.11" -c 'import platform, sys; assert platform.machine() == "aarch64", platform.machine()' >&2
printf '%s\n%s\n' "$packages" "$(date -u +%FT%TZ)" > "$marker"
echo "$root"
