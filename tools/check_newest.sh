#!/usr/bin/env bash
# The whole suite (`bazel test //...`) beside the newest releases: jax,
# jaxlib, NumPy, SciPy and ml_dtypes from third_party/python/newest.lock
# (XLABIND_LOCK=newest). CI runs it near the end.
#
#   tools/check_newest.sh [bazel test options]
#
# It runs under tools/bazel7 (bzlmod only unless the options say otherwise:
# CI gives `--enable_workspace --noenable_bzlmod`, see .ci/run)
# on Debian sid's CPython 3.13 in that script's chroot: an interpreter every
# machine that runs tools/bazel7 has (jax 0.11 and later need 3.12 or newer;
# Debian 12's is 3.11), and the newest the pinned lock also covers. Its own
# output base, so the other Bazel 7 runs keep their @xlabind_pypi; the
# workspace's bazel-* links then point at its outputs.
set -euo pipefail
cd "$(dirname "$0")/.."
base="$HOME/.cache/xlabind-bazel7/newest-$(pwd -P | sha256sum | cut -c1-12)"
echo "check_newest: CPython 3.13 (Debian sid's), third_party/python/newest.lock"
status=0
XLABIND_LOCK=newest XLABIND_PYTHON=/usr/bin/python3.13 tools/bazel7 --output_base="$base" \
    test "$@" //... || status=$?
tools/bazel7 --output_base="$base" shutdown  # its server would idle on in CI
exit $status
