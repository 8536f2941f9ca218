#!/usr/bin/env python3
"""Regenerates the hash-pinned lock files from their requirements.in files.

Each requirements.in pins exact versions. For every CPython version the pinned
jax supports (3.11-3.13) this asks pip which x86_64 Linux wheel it would
install, downloads it and records its sha256, so one lock serves every
supported interpreter. The locks of the headers other machines build against
(third_party/python/target_headers.in) and of what the aarch64 wheel's tests
run beside (third_party/python/aarch64_tests.in) hold those machines' wheels
instead.
pip is the only client used: it talks to whatever package index the
machine's pip is configured for.

    python3 tools/update_lock.py            # rewrite every lock
    python3 tools/update_lock.py --check    # exit 1 if a lock is stale
    python3 tools/update_lock.py third_party/python/lower_bound.in   # just this one
"""

from __future__ import annotations

import argparse
import hashlib
import pathlib
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
LOCKS = {
    REPO / "third_party/python/requirements.in": REPO / "third_party/python/requirements.lock",
    REPO / "third_party/python/lower_bound.in": REPO / "third_party/python/lower_bound.lock",
    REPO / "third_party/python/newest.in": REPO / "third_party/python/newest.lock",
    REPO / "third_party/toolchains/zig/requirements.in": REPO
    / "third_party/toolchains/zig/requirements.lock",
    REPO / "third_party/cuda/requirements.in": REPO / "third_party/cuda/requirements.lock",
    REPO / "docs/sphinx/requirements.in": REPO / "docs/sphinx/requirements.lock",
    REPO / "third_party/cmake/requirements.in": REPO / "third_party/cmake/requirements.lock",
    REPO / "third_party/lint/requirements.in": REPO / "third_party/lint/requirements.lock",
    REPO / "third_party/python/target_headers.in": REPO / "third_party/python/target_headers.lock",
    REPO / "third_party/python/aarch64_tests.in": REPO / "third_party/python/aarch64_tests.lock",
}
PYTHON_VERSIONS = ("3.11", "3.12", "3.13")
#: The CPython versions of a lock whose jax needs others than PYTHON_VERSIONS.
LOCK_PYTHON_VERSIONS = {
    REPO / "third_party/python/newest.in": ("3.12", "3.13", "3.14"),
    # Whatever interpreter builds a wheel for another machine (3.11-3.14).
    REPO / "third_party/python/target_headers.in": ("3.11", "3.12", "3.13", "3.14"),
    # The CPython versions Debian ships for aarch64 (tests/packaging/aarch64_sysroot.py).
    REPO / "third_party/python/aarch64_tests.in": ("3.11", "3.13"),
}
PLATFORMS = (
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux2010_x86_64",
    "manylinux_2_12_x86_64",
)
#: pip's platform tags of each machine xlabind builds for (tools/platforms);
#: repositories.bzl installs a target's headers with the same.
TARGET_PLATFORMS = {
    "Linux aarch64": (
        "manylinux_2_17_aarch64",
        "manylinux2014_aarch64",
        "manylinux_2_27_aarch64",
        "manylinux_2_28_aarch64",
    ),
    "macOS arm64": ("macosx_11_0_arm64",),
}
#: The locks of other machines' wheels, and which machines.
LOCK_PLATFORMS = {
    REPO / "third_party/python/target_headers.in": ("Linux aarch64", "macOS arm64"),
    REPO / "third_party/python/aarch64_tests.in": ("Linux aarch64",),
}


def pins(requirements_in: pathlib.Path) -> list[str]:
    lines = [line.split("#")[0].strip() for line in requirements_in.read_text().splitlines()]
    pinned = [line for line in lines if line]
    for line in pinned:
        if "==" not in line:
            sys.exit(f"{requirements_in}: '{line}' is not pinned with ==")
    return pinned


def wheel_hashes(
    pin: str,
    workdir: pathlib.Path,
    python_versions: tuple[str, ...] = PYTHON_VERSIONS,
    platforms: tuple[str, ...] = PLATFORMS,
) -> dict[str, str]:
    """Returns {wheel filename: sha256} over every Python version of the lock,
    for one machine (`platforms`: pip's tags for it, any of which will do)."""
    found = {}
    for version in python_versions:
        dest = workdir / version
        abi = "cp" + version.replace(".", "")
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            version,
            "--implementation",
            "cp",
            "--abi",
            abi,
            "--abi",
            "abi3",
            "--abi",
            "none",
            "--dest",
            str(dest),
            pin,
        ]
        for platform in platforms:
            cmd += ["--platform", platform]
        subprocess.run(cmd, check=True)
    for wheel in workdir.glob("*/*.whl"):
        name = pin.split("==")[0].lower().replace("-", "_")
        if wheel.name.lower().startswith(name + "-"):
            found[wheel.name] = hashlib.sha256(wheel.read_bytes()).hexdigest()
    return found


def render(requirements_in: pathlib.Path) -> str:
    versions = LOCK_PYTHON_VERSIONS.get(requirements_in, PYTHON_VERSIONS)
    machines = LOCK_PLATFORMS.get(requirements_in)
    where = " and ".join(machines) if machines else "x86_64 Linux"
    out = [
        f"# Generated by tools/update_lock.py from {requirements_in.relative_to(REPO)}.",
        f"# Hashes cover CPython {', '.join(versions)} on {where}. Do not edit.",
        "",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for pin in pins(requirements_in):
            hashes = {}
            for machine in machines or (None,):
                workdir = pathlib.Path(tmp) / pin.replace("==", "-") / str(machine)
                platforms = TARGET_PLATFORMS[machine] if machine else PLATFORMS
                hashes.update(wheel_hashes(pin, workdir, versions, platforms))
            out.append(f"{pin} \\")
            out.extend(f"    --hash=sha256:{h} \\" for _, h in sorted(hashes.items()))
            out[-1] = out[-1].rstrip(" \\")
            out.append("    # " + ", ".join(sorted(hashes)))
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a lock differs")
    parser.add_argument(
        "only", nargs="*", type=pathlib.Path, help="requirements.in files to lock (default: all)"
    )
    args = parser.parse_args()
    only = {path.resolve() for path in args.only}
    stale = False
    for requirements_in, lock in LOCKS.items():
        if only and requirements_in not in only:
            continue
        text = render(requirements_in)
        if args.check:
            if not lock.exists() or lock.read_text() != text:
                print(f"stale: {lock.relative_to(REPO)}")
                stale = True
        else:
            lock.write_text(text)
            print(f"wrote {lock.relative_to(REPO)}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
