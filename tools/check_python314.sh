#!/usr/bin/env bash
# The CPython 3.14 wheel: built beside the newest lock's jax (0.12.0.1, the
# first with cp314 wheels; third_party/python/newest.lock), installed there
# and checked by tools/check_wheel.py (the demo, the suite's core, a type
# check), as tools/check_interpreters.sh does for 3.12 and 3.13. This
# machine has no 3.14: Debian sid's, in tools/bazel7's chroot, builds and
# runs it. CI runs it after tools/check_newest.sh, in the same mode (its
# options go to Bazel): the two builds then share, through the disk cache,
# every compile that does not depend on the interpreter. Then the cp314 wheel
# for Linux aarch64, cross-built and checked from its bytes by the `cross`
# tests of tests/packaging (not run: the aarch64 sysroots have CPython 3.11
# and 3.13 alone, tests/packaging/aarch64_sysroot.py).
#
#   tools/check_python314.sh [bazel build options]
set -euo pipefail
cd "$(dirname "$0")/.."
# One output base per checkout and per options: bzlmod and WORKSPACE name
# @xlabind_pypi's folder differently, and one base would keep both.
base="$HOME/.cache/xlabind-bazel7/python3.14-$(printf '%s\n' "$(pwd -P)" "$@" | sha256sum | cut -c1-12)"
dist="$(mktemp -d)"
echo "check_python314: CPython 3.14 (Debian sid's), third_party/python/newest.lock"
export XLABIND_LOCK=newest XLABIND_PYTHON=/usr/bin/python3.14
tools/bazel7 --output_base="$base" run "$@" //tools:build_wheel -- --out "$dist"
tools/bazel7 --output_base="$base" test "$@" --config=all //tests/packaging:test_platform_modules \
    //tests/packaging:test_wheel_platforms
tools/bazel7 --output_base="$base" shutdown  # its server would idle on in CI
wheel="$(ls "$dist"/xlabind-*-cp314-cp314-*.whl)"
site="$(ls -d "$base"/external/*xlabind_pypi/site)"
# mypy (for the type check) comes from the newest lock's packages.
tools/bazel7 --exec /usr/bin/env PYTHONPATH="$site" /usr/bin/python3.14 tools/check_wheel.py \
    "$wheel" --site "$site" --tests core
