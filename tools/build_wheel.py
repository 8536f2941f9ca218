#!/usr/bin/env python3
"""Builds the xlabind wheel from the package Bazel built.

    tools/bazel run --config=release //tools:build_wheel -- --out "$PWD/dist"
    XLABIND_PYTHON="$(command -v python3.12)" tools/bazel run --config=release \
        //tools:build_wheel -- --out "$PWD/dist"

The wheel holds the `xlabind` package as Bazel assembled it: the Python
sources (with `py.typed`) and the three compiled modules — `_xlabind` (the
Python-callback handlers, CPU and CUDA), `_xlabind_ops` (native CPU ops) and
`_xlabind_cuda_ops` (native CUDA kernels, which load libcudart.so.13 from the
`cuda13` extra's nvidia-cuda-runtime through their RUNPATH). The modules are
built for the interpreter Bazel used (`XLABIND_PYTHON`, else python3 on
PATH): the tag is cpXY-cpXY, and the platform tag is the newest glibc symbol
version the modules need (2.17 with the zig toolchain).

Dependencies are lower bounds (the tested ones, no upper caps: only what is
known to fail refuses), from python/xlabind/_compatibility.py. Entries carry
a fixed time stamp, so the same inputs give the same bytes.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.util
import pathlib
import re
import sys
import zipfile

import xlabind


def _package_file(name: str):
    """One of the package's own source files (the wheel packs the package;
    its metadata comes from the package's tables), run as a module of its own."""
    spec = importlib.util.spec_from_file_location(
        name, pathlib.Path(xlabind.__file__).parent / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_compatibility = _package_file("_compatibility")

FIXED_TIME = (2020, 1, 1, 0, 0, 0)  # zip cannot store earlier than 1980
# Not resolved: under Bazel the runfiles tree (symlinks) holds the data files.
REPO = pathlib.Path(__file__).parent.parent
MODULES = ("_xlabind", "_xlabind_ops", "_xlabind_cuda_ops")
#: Where the cuda13 extra's nvidia-cuda-runtime puts libcudart.so.13, from a
#: module in site-packages/xlabind. The only RUNPATH entry a wheel module keeps.
WHEEL_RUNPATH = b"$ORIGIN/../nvidia/cu13/lib"
PROJECT_URLS = {
    "Source": "https://github.com/xlabind/xlabind",
    "Documentation": "https://github.com/xlabind/xlabind#readme",
    "Issues": "https://github.com/xlabind/xlabind/issues",
}
CLASSIFIERS = (
    "Development Status :: 4 - Beta",
    "Intended Audience :: Science/Research",
    "License :: OSI Approved :: Apache Software License",
    "Operating System :: POSIX :: Linux",
    "Programming Language :: C++",
    "Programming Language :: Python :: 3",
    "Topic :: Scientific/Engineering",
    "Typing :: Typed",
)


def cuda_runtime_requirement() -> str:
    """nvidia-cuda-runtime from the version the build links against (the CUDA
    lock) up to the next major: libcudart.so.13 keeps its ABI within 13.x."""
    pins = (REPO / "third_party/cuda/requirements.in").read_text()
    version = re.search(r"^nvidia-cuda-runtime==(\S+)", pins, flags=re.M).group(1)
    major = int(version.split(".")[0])
    return f"nvidia-cuda-runtime>={version},<{major + 1}"


def glibc_needed(module: bytes) -> tuple[int, int]:
    """The newest GLIBC_2.x symbol version a module asks for."""
    minors = [int(m) for m in re.findall(rb"GLIBC_2\.(\d+)", module)]
    return (2, max(minors, default=17))


def wheel_tag(glibc: tuple[int, int]) -> str:
    version = f"cp{sys.version_info.major}{sys.version_info.minor}"
    return f"{version}-{version}-manylinux_{glibc[0]}_{max(glibc[1], 17)}_x86_64"


def keep_wheel_runpath(module: bytes) -> bytes:
    """The module with each RUNPATH reduced to WHEEL_RUNPATH (or nothing): the
    Bazel runfiles entries mean nothing in site-packages. The string is
    shortened in place and padded with NULs, so no offset moves."""

    def shorten(match: re.Match) -> bytes:
        entries = match.group(0).split(b":")
        kept = b":".join(e for e in entries if e == WHEEL_RUNPATH)
        return kept + b"\0" * (len(match.group(0)) - len(kept))

    return re.sub(rb"\$ORIGIN[^\0]*", shorten, module)


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def package_files() -> dict[str, bytes]:
    """xlabind/...: every Python source, py.typed, the native API's headers and
    CMake package, and the compiled modules."""
    # Not resolved: the runfiles tree holds the built modules beside the sources.
    package = pathlib.Path(xlabind.__file__).parent
    files = {}
    for path in sorted(package.rglob("*")):
        relative = path.relative_to(package).as_posix()
        if "__pycache__" in relative:
            continue
        # The native API for builds without Bazel (xlabind/native_build.py).
        native_build = relative.startswith(("include/", "cmake/")) and path.is_file()
        if path.suffix == ".py" or relative == "py.typed" or native_build:
            files[f"xlabind/{relative}"] = path.read_bytes()
    for module in MODULES:
        path = package / f"{module}.so"
        if not path.exists():
            sys.exit(f"build_wheel: the compiled module {path.name} is missing")
        files[f"xlabind/{module}.so"] = keep_wheel_runpath(path.read_bytes())
    return files


def metadata(version: str) -> bytes:
    readme = (REPO / "README.md").read_text()
    headers = [
        "Metadata-Version: 2.1",
        "Name: xlabind",
        f"Version: {version}",
        "Summary: Bind fast non-JAX code (C++, CUDA, NumPy, CuPy) into jax.jit, jax.vmap "
        "and jax.grad",
        "Author: The xlabind authors",
        "License: Apache-2.0",
        *(f"Project-URL: {name}, {url}" for name, url in PROJECT_URLS.items()),
        *(f"Classifier: {c}" for c in CLASSIFIERS),
        f"Requires-Python: =={sys.version_info.major}.{sys.version_info.minor}.*",
        *(f"Requires-Dist: {_compatibility.requirement(name)}" for name in _compatibility.TESTED),
        "Provides-Extra: cuda13",
        f'Requires-Dist: {cuda_runtime_requirement()}; extra == "cuda13"',
        "Description-Content-Type: text/markdown",
    ]
    return ("\n".join(headers) + "\n\n" + readme).encode()


def build(out_dir: pathlib.Path) -> pathlib.Path:
    version = xlabind.__version__
    files = package_files()
    glibc = max(glibc_needed(data) for name, data in files.items() if name.endswith(".so"))
    tag = wheel_tag(glibc)
    dist_info = f"xlabind-{version}.dist-info"
    files[f"{dist_info}/METADATA"] = metadata(version)
    files[f"{dist_info}/WHEEL"] = "\n".join(
        [
            "Wheel-Version: 1.0",
            "Generator: xlabind tools/build_wheel.py",
            "Root-Is-Purelib: false",
            f"Tag: {tag}",
            "",
        ]
    ).encode()
    files[f"{dist_info}/top_level.txt"] = b"xlabind\n"
    files[f"{dist_info}/licenses/LICENSE"] = (REPO / "LICENSE").read_bytes()
    record_name = f"{dist_info}/RECORD"
    record = [record_line(name, data) for name, data in files.items()] + [f"{record_name},,"]
    files[record_name] = ("\n".join(record) + "\n").encode()

    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / f"xlabind-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            info.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return wheel


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        required=True,
        type=pathlib.Path,
        help="folder for the wheel (an absolute path under bazel run)",
    )
    args = parser.parse_args()
    print(build(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
