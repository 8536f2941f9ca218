#!/usr/bin/env bash
# Builds the wheel for each other CPython the lock covers (3.12, 3.13) that this
# machine has, and checks it with tools/check_wheel.py: the core of the suite
# beside the pinned jax (the main suite ran on 3.11 only), and what only an
# installed wheel can get wrong beside the oldest supported one (the core ran
# there on 3.11: tests/packaging/test_wheel_installed.py). CI runs this after
# the main tests. Then the same interpreter's Linux aarch64 wheel, cross-built
# and checked by the `cross` tests of tests/packaging: from its modules' bytes,
# and under qemu-user where an aarch64 sysroot for that CPython exists
# (tests/packaging/aarch64_sysroot.py: 3.13; Debian has no aarch64 3.12).
#
#   tools/check_interpreters.sh [3.12 3.13]
#
# Each interpreter gets its own Bazel output base (~/.cache/xlabind-python<X.Y>-
# <hash of this checkout's path>: one output base must never serve two checkouts,
# or the wheel may be packed from the other one's sources) and no bazel-* links,
# so the main build's cache and links stay as they are. They share a disk cache
# ($XLABIND_DISK_CACHE, which CI's main build fills too): what does not depend
# on the interpreter (the ops' handlers, nvcc's kernels) compiles once.
set -euo pipefail
cd "$(dirname "$0")/.."

find_python() {  # python<X.Y> on PATH, else pyenv's
  local version="$1" candidate
  for candidate in "python$version" \
      $(ls -d "$(pyenv root 2>/dev/null || echo /nonexistent)/versions/$version"*/bin/python3 2>/dev/null); do
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys' 2>/dev/null; then
      command -v "$candidate"
      return 0
    fi
  done
  return 1
}

versions=("$@")
[[ ${#versions[@]} -gt 0 ]] || versions=(3.12 3.13)
checked=0
disk_cache="${XLABIND_DISK_CACHE:-$HOME/.cache/xlabind-interpreters-disk-cache}"
for version in "${versions[@]}"; do
  if ! python="$(find_python "$version")"; then
    echo "check_interpreters: no CPython $version here; its wheel is not checked"
    continue
  fi
  base="$HOME/.cache/xlabind-python$version-$(pwd -P | sha256sum | cut -c1-12)"
  dist="$(mktemp -d)"
  echo "check_interpreters: CPython $version ($python)"
  XLABIND_PYTHON="$python" tools/bazel --output_base="$base" build --symlink_prefix=/ \
      --disk_cache="$disk_cache" \
      //tools:build_wheel @xlabind_pypi_lower_bound//:packages
  XLABIND_PYTHON="$python" tools/bazel --output_base="$base" run --symlink_prefix=/ \
      --disk_cache="$disk_cache" \
      //tools:build_wheel -- --out "$dist"
  wheel="$(ls "$dist"/xlabind-*.whl)"
  pinned="$base/external/xlabind_pypi/site"
  # mypy (for the type check) comes from the pinned packages.
  PYTHONPATH="$pinned" "$python" tools/check_wheel.py "$wheel" --site "$pinned" --tests core
  PYTHONPATH="$pinned" "$python" tools/check_wheel.py "$wheel" \
      --site "$base/external/xlabind_pypi_lower_bound/site" --tests install
  XLABIND_PYTHON="$python" tools/bazel --output_base="$base" test --symlink_prefix=/ \
      --disk_cache="$disk_cache" --config=all //tests/packaging:test_platform_modules \
      //tests/packaging:test_wheel_platforms //tests/packaging:test_wheel_emulated
  tools/bazel --output_base="$base" shutdown  # its server would idle on in CI
  checked=$((checked + 1))
done
echo "check_interpreters: checked the wheel for $checked other interpreter(s)"
