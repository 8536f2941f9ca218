#!/usr/bin/env python3
"""Builds the xlabind wheel from the package Bazel built.

    tools/bazel run --config=release //tools:build_wheel -- --out "$PWD/dist"
    tools/bazel run --config=release //tools:build_wheel -- --platform linux_aarch64 \
        --out "$PWD/dist"
    XLABIND_PYTHON="$(command -v python3.12)" tools/bazel run --config=release \
        //tools:build_wheel -- --out "$PWD/dist"

The wheel holds the `xlabind` package as Bazel assembled it: the Python
sources (with `py.typed`) and the compiled modules — `_xlabind` (the
Python-callback handlers, CPU and CUDA), `_xlabind_ops` (native CPU ops) and,
on x86_64 Linux only, `_xlabind_cuda_ops` (native CUDA kernels, which load
libcudart.so.13 from the `cuda13` extra's nvidia-cuda-runtime through their
RUNPATH). `--platform` picks the machine (tools/platforms; default: this
one): another machine's modules are those //tools/platforms cross-compiles
in the same build. The modules are built for the interpreter Bazel used
(`XLABIND_PYTHON`, else python3 on PATH), which runs this script too: the
tag is cpXY-cpXY. The platform tag is read from the modules' bytes
(read_elf): their ELF machine, and the newest glibc symbol version they
need (2.17 with the zig toolchain).

Nothing here imports the package it packs (another machine's modules cannot
load here): its version and its dependency table are read from its sources.
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
import platform as host
import re
import struct
import sys
import zipfile

FIXED_TIME = (2020, 1, 1, 0, 0, 0)  # zip cannot store earlier than 1980
# Not resolved: under Bazel the runfiles tree (symlinks) holds the data files.
REPO = pathlib.Path(__file__).parent.parent
# The package as Bazel assembled it in the runfiles: sources, generated
# headers and CMake files, and this machine's compiled modules.
PACKAGE = REPO / "python" / "xlabind"


def _package_file(name: str):
    """One of the package's own source files (the wheel packs the package;
    its metadata comes from the package's tables), run as a module of its own,
    without importing the package."""
    spec = importlib.util.spec_from_file_location(f"xlabind_{name}", PACKAGE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_compatibility = _package_file("_compatibility")

#: The compiled modules of each machine's wheel (tools/platforms). Other
#: machines have no CUDA module yet: the pinned nvcc and CUDA runtime are
#: x86_64 Linux wheels.
PLATFORM_MODULES = {
    "linux_x86_64": ("_xlabind", "_xlabind_ops", "_xlabind_cuda_ops"),
    "linux_aarch64": ("_xlabind", "_xlabind_ops"),
}
#: The machines of tools/platforms that get no wheel, and why (the modules
#: still cross-compile, for tests/packaging/test_macos_modules.py).
NO_WHEEL = {
    "macos_arm64": (
        "no macOS arm64 wheel is built: no package registry the build uses (PyPI, "
        "Debian) ships CPython's macOS headers, whose pyconfig.h differs from Linux's "
        "(SIZEOF_LONG_DOUBLE among others), and zig 0.14.1's Mach-O linker exports "
        "libc++'s operator new/delete from the modules (docs/development/wheels.md, "
        '"macOS")'
    ),
}
#: ELF e_machine values of the machines xlabind builds for.
ELF_MACHINES = {62: "x86_64", 183: "aarch64"}
#: Where the CUDA runtime the cuda13 extra installs is, from a module in
#: site-packages/xlabind. The only RUNPATH entry a wheel module keeps.
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


def this_machine() -> str:
    """The tools/platforms name of the machine this runs on."""
    name = f"{sys.platform}_{host.machine()}"
    if name not in PLATFORM_MODULES:
        sys.exit(
            f"build_wheel: this machine ({name}) is none of {sorted(PLATFORM_MODULES)}: "
            "name one with --platform"
        )
    return name


def package_version() -> str:
    """`__version__` of python/xlabind/__init__.py, read from its text."""
    text = (PACKAGE / "__init__.py").read_text()
    found = re.search(r'^__version__ = "([^"]+)"$', text, flags=re.M)
    if not found:
        sys.exit(f'build_wheel: no `__version__ = "..."` line in {PACKAGE / "__init__.py"}')
    return found.group(1)


def cuda_runtime_requirement() -> str:
    """nvidia-cuda-runtime from the version the build links against (the CUDA
    lock) up to the next major: libcudart.so.13 keeps its ABI within 13.x."""
    pins = (REPO / "third_party/cuda/requirements.in").read_text()
    version = re.search(r"^nvidia-cuda-runtime==(\S+)", pins, flags=re.M).group(1)
    major = int(version.split(".")[0])
    return f"nvidia-cuda-runtime>={version},<{major + 1}"


def elf_sections(data: bytes, name: str) -> list[tuple[int, bytes, bytes]]:
    """The sections of `data`, a 64-bit little-endian ELF file (`name`, for
    errors), each as (sh_type, its bytes, the bytes of the section its
    sh_link names: a symbol or version table's strings)."""
    if data[:4] != b"\x7fELF":
        raise ValueError(f"read_elf: {name} is not an ELF file (it starts {data[:4]!r})")
    if data[4:6] != b"\x02\x01":
        raise ValueError(
            f"read_elf: {name} is not 64-bit little-endian ELF (EI_CLASS, EI_DATA: "
            f"{data[4]}, {data[5]}; expected 2, 1)"
        )
    (start,) = struct.unpack_from("<Q", data, 0x28)
    size, count = struct.unpack_from("<HH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQI", data, start + i * size) for i in range(count)]
    contents = [data[h[4] : h[4] + h[5]] for h in headers]
    return [(h[1], contents[i], contents[h[6]]) for i, h in enumerate(headers)]


def elf_string(table: bytes, offset: int) -> str:
    return table[offset : table.index(b"\0", offset)].decode("ascii", "replace")


def read_elf(data: bytes, name: str = "module") -> tuple[str, tuple[int, int] | None]:
    """A module's machine ("x86_64", "aarch64" or "EM_<number>") and the
    newest GLIBC_x.y version its symbols need (None: none), from its bytes
    (a module built for another machine cannot be imported here to ask it)."""
    versions = []
    for kind, needs, strings in elf_sections(data, name):
        offset = 0
        while kind == 0x6FFFFFFE:  # SHT_GNU_VERNEED: Elf64_Verneed, then its Vernaux
            _, aux_count, _, aux, next_offset = struct.unpack_from("<HHIII", needs, offset)
            aux += offset
            for _ in range(aux_count):
                _, _, _, name_offset, next_aux = struct.unpack_from("<IHHII", needs, aux)
                versions.append(elf_string(strings, name_offset))
                aux += next_aux
            if not next_offset:
                break
            offset += next_offset
    glibc = [re.fullmatch(r"GLIBC_(\d+)\.(\d+)", version) for version in versions]
    (machine,) = struct.unpack_from("<H", data, 18)
    return (
        ELF_MACHINES.get(machine, f"EM_{machine}"),
        max([(int(m[1]), int(m[2])) for m in glibc if m], default=None),
    )


def platform_tag(modules: dict[str, bytes], platform: str) -> str:
    """The wheel's platform tag, from the modules' bytes: their ELF machine
    (which must be `platform`'s) and the newest glibc symbol version any of
    them needs (the manylinux2014 baseline, 2.17, at least)."""
    read = {name: read_elf(data, name) for name, data in modules.items()}
    expected = platform.removeprefix("linux_")  # the machine, as ELF_MACHINES names it
    wrong = {name: machine for name, (machine, _) in read.items() if machine != expected}
    if wrong:
        sys.exit(
            f"build_wheel: --platform {platform} needs {expected} modules, "
            f"but these are built for another machine: {wrong}"
        )
    glibc = max([(2, 17)] + [glibc for _, glibc in read.values() if glibc])
    return f"manylinux_{glibc[0]}_{glibc[1]}_{expected}"


def wheel_tag(platform_tag: str) -> str:
    version = f"cp{sys.version_info.major}{sys.version_info.minor}"
    return f"{version}-{version}-{platform_tag}"


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


def package_files(platform: str) -> dict[str, bytes]:
    """xlabind/...: every Python source, py.typed, the native API's headers and
    CMake package, and `platform`'s compiled modules."""
    files = {}
    for path in sorted(PACKAGE.rglob("*")):
        relative = path.relative_to(PACKAGE).as_posix()
        if "__pycache__" in relative:
            continue
        # The native API for builds without Bazel (xlabind/native_build.py).
        native_build = relative.startswith(("include/", "cmake/")) and path.is_file()
        if path.suffix == ".py" or relative == "py.typed" or native_build:
            files[f"xlabind/{relative}"] = path.read_bytes()
    # This machine's modules are beside the sources; another's where
    # //tools/platforms puts them (tools/platforms/defs.bzl).
    folder = PACKAGE if platform == this_machine() else REPO / f"tools/platforms/{platform}_modules"
    for module in PLATFORM_MODULES[platform]:
        path = folder / f"{module}.so"
        if not path.exists():
            sys.exit(f"build_wheel: the compiled module {path} is missing")
        files[f"xlabind/{module}.so"] = keep_wheel_runpath(path.read_bytes())
    return files


def metadata(version: str, cuda: bool) -> bytes:
    """METADATA; `cuda`: whether the wheel holds the CUDA module (whose
    runtime the cuda13 extra installs)."""
    readme = (REPO / "README.md").read_text()
    extra = f'Requires-Dist: {cuda_runtime_requirement()}; extra == "cuda13"' if cuda else ""
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
        *(["Provides-Extra: cuda13", extra] if cuda else []),
        "Description-Content-Type: text/markdown",
    ]
    return ("\n".join(headers) + "\n\n" + readme).encode()


def build(out_dir: pathlib.Path, platform: str | None = None) -> pathlib.Path:
    """The wheel for `platform` (a tools/platforms name; default: this
    machine), written into `out_dir`."""
    platform = platform or this_machine()
    if platform in NO_WHEEL:
        sys.exit(f"build_wheel: --platform {platform}: {NO_WHEEL[platform]}")
    if platform not in PLATFORM_MODULES:
        sys.exit(
            f"build_wheel: --platform must be one of {sorted(PLATFORM_MODULES)}, not {platform!r}"
        )
    version = package_version()
    files = package_files(platform)
    modules = {name: data for name, data in files.items() if name.endswith(".so")}
    tag = wheel_tag(platform_tag(modules, platform))
    dist_info = f"xlabind-{version}.dist-info"
    cuda = "xlabind/_xlabind_cuda_ops.so" in files
    files[f"{dist_info}/METADATA"] = metadata(version, cuda)
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
    parser.add_argument(
        "--platform",
        choices=sorted([*PLATFORM_MODULES, *NO_WHEEL]),
        help="the machine the wheel is for (tools/platforms; default: this one)",
    )
    args = parser.parse_args()
    print(build(args.out, args.platform))
    return 0


if __name__ == "__main__":
    sys.exit(main())
