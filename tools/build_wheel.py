#!/usr/bin/env python3
"""Builds the xlabind wheel from the package Bazel built.

    tools/bazel run //tools:build_wheel -- --out "$PWD/dist"

The wheel holds the `xlabind` package as Bazel assembled it (Python sources
plus the compiled `_xlabind` extension). The extension is built for the
interpreter Bazel used (a cpXY-cpXY tag) and needs only glibc 2.17
(manylinux_2_17_x86_64, from the zig toolchain). Its dependencies are the
pinned jax, jaxlib, numpy and ml_dtypes of third_party/python/requirements.in.
Entries carry a fixed time stamp, so the same inputs give the same bytes.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import pathlib
import re
import sys
import zipfile

import xlabind

REPO_REQUIREMENTS = ("jax", "jaxlib", "numpy", "ml_dtypes")
FIXED_TIME = (2020, 1, 1, 0, 0, 0)  # zip cannot store earlier than 1980


def requirements() -> list[str]:
    """Requires-Dist lines: the pinned versions of the runtime dependencies."""
    # Not resolved: under Bazel the runfiles tree (symlinks) holds the data file.
    lock_in = pathlib.Path(__file__).parent.parent / "third_party/python/requirements.in"
    pins = {}
    if lock_in.exists():
        for line in lock_in.read_text().splitlines():
            match = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line.strip())
            if match:
                pins[match.group(1).lower()] = match.group(2)
    return [f"{name}=={pins[name]}" if name in pins else name for name in REPO_REQUIREMENTS]


def wheel_tag() -> str:
    version = f"cp{sys.version_info.major}{sys.version_info.minor}"
    return f"{version}-{version}-manylinux_2_17_x86_64"


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build(out_dir: pathlib.Path) -> pathlib.Path:
    # Not resolved: the runfiles tree holds the built extension beside the sources.
    package = pathlib.Path(xlabind.__file__).parent
    version = xlabind.__version__
    files = {}
    for path in sorted(package.iterdir()):
        if path.suffix == ".py" or path.name.startswith("_xlabind") and path.suffix == ".so":
            files[f"xlabind/{path.name}"] = path.read_bytes()
    if "xlabind/_xlabind.so" not in files:
        sys.exit("build_wheel: the compiled extension _xlabind.so is missing")
    dist_info = f"xlabind-{version}.dist-info"
    files[f"{dist_info}/METADATA"] = "\n".join([
        "Metadata-Version: 2.1",
        "Name: xlabind",
        f"Version: {version}",
        "Summary: Bind fast non-JAX code into jax.jit, jax.vmap and jax.grad",
        f"Requires-Python: =={sys.version_info.major}.{sys.version_info.minor}.*",
        *(f"Requires-Dist: {r}" for r in requirements()),
        "",
    ]).encode()
    files[f"{dist_info}/WHEEL"] = "\n".join([
        "Wheel-Version: 1.0",
        "Generator: xlabind tools/build_wheel.py",
        "Root-Is-Purelib: false",
        f"Tag: {wheel_tag()}",
        "",
    ]).encode()
    files[f"{dist_info}/top_level.txt"] = b"xlabind\n"
    record_name = f"{dist_info}/RECORD"
    record = [record_line(name, data) for name, data in files.items()] + [f"{record_name},,"]
    files[record_name] = ("\n".join(record) + "\n").encode()

    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / f"xlabind-{version}-{wheel_tag()}.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            info.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return wheel


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=pathlib.Path,
                        help="folder for the wheel (an absolute path under bazel run)")
    args = parser.parse_args()
    print(build(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
