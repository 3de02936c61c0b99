#!/usr/bin/env bash
# Installs TensorFlow RELEASE (2.15 ... 2.21) for Linux aarch64 and CPython
# 3.11 into SITE, from this x86-64 machine (`pip install --target
# --platform`), unless SITE already holds it; prints the distribution and
# version installed ("tensorflow 2.21.0").
#
#   build_tools/aarch64_tensorflow.sh RELEASE SITE
#
# Google's `tensorflow` wheels cover aarch64 from 2.16 on. 2.15's `tensorflow`
# for aarch64 is a shim whose one requirement, tensorflow-cpu-aws, carries an
# environment marker that pip evaluates for the machine it runs on (x86-64
# here: nothing installed), so 2.15 installs tensorflow-cpu-aws by name.
set -euo pipefail
release=${1:?usage: aarch64_tensorflow.sh RELEASE SITE}
site=${2:?usage: aarch64_tensorflow.sh RELEASE SITE}
python=${PYTHON:-python3}
distribution=tensorflow
[ "$release" = 2.15 ] && distribution=tensorflow-cpu-aws
installed() { compgen -G "$site/${distribution//-/_}-$release.*.dist-info" | head -1; }
if [ -z "$(installed)" ]; then
  rm -rf "$site"
  "$python" -m pip install -q --target "$site" --only-binary=:all: --implementation cp --python-version 3.11 \
    --platform manylinux_2_27_aarch64 --platform manylinux_2_28_aarch64 --platform manylinux2014_aarch64 \
    "$distribution==$release.*" >&2
fi
record=$(basename "$(installed)" .dist-info)
echo "$distribution ${record##*-}"
