"""The public helper headers (ffi/native/include/xlabind/native, shipped in the
wheel under xlabind/include/xlabind/native) as a handler author outside Bazel
meets them: each compiles on its own, warnings as errors, with g++ and with zig's
clang (and host_device.h, meant for device code, with the pinned nvcc); none
includes anything but another public header or XLA's header-only FFI API
(never ffi_api.h: a handler library that links XLA's registry gets a second
one, and crashes)."""

import concurrent.futures
import pathlib
import re
import shutil
import subprocess

import cases
import jax.ffi
import pytest
import runfiles_repos

import xlabind

RUNFILES = pathlib.Path(__file__).parents[2]
PACKAGE = RUNFILES / "ffi" / "native"
INCLUDE = PACKAGE / "include"  # what -I a handler's build gives, in the checkout
SOURCE = INCLUDE / "xlabind" / "native"
SHIPPED = pathlib.Path(xlabind.include_dir())
XLA_API = {"xla/ffi/api/ffi.h", "xla/ffi/api/api.h", "xla/ffi/api/c_api.h"}
WARNINGS = ["-std=c++17", "-Wall", "-Wextra", "-Werror"]


def public_headers() -> list[str]:
    """ffi/native/headers.bzl's PUBLIC_HEADERS."""
    namespace: dict = {}
    exec((PACKAGE / "headers.bzl").read_text(), namespace)
    return namespace["PUBLIC_HEADERS"]


def compilers() -> dict[str, list[str]]:
    """The C++ compilers to try: the host's g++ and the pinned zig."""
    found = {}
    if shutil.which("g++"):
        found["g++"] = ["g++"]
    zig = (runfiles_repos.repository("xlabind_zig") or RUNFILES.parent / "xlabind_zig") / "zig-cc"
    if zig.exists():
        found["zig"] = [str(zig)]
    return found


def compile_alone(
    compiler: list[str], include: pathlib.Path, header: str, workdir: pathlib.Path
) -> subprocess.CompletedProcess:
    """A translation unit holding only `#include "xlabind/native/<header>"`,
    compiled (zig has no -fsyntax-only); XLA's headers are system headers
    (their warnings are not ours)."""
    source = workdir / f"{header.replace('.', '_')}_alone.cc"
    source.write_text(f'#include "xlabind/native/{header}"\n')
    return subprocess.run(
        [
            *compiler,
            "-c",
            "-o",
            str(source.with_suffix(".o")),
            *WARNINGS,
            f"-I{include}",
            "-isystem",
            jax.ffi.include_dir(),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_list_is_the_folder_and_the_wheel_ships_it():
    headers = public_headers()
    assert sorted(headers) == sorted(p.name for p in SOURCE.glob("*.h"))
    shipped = SHIPPED / "xlabind" / "native"
    assert sorted(p.name for p in shipped.glob("*.h")) == sorted(headers)
    for header in headers:
        assert (shipped / header).read_bytes() == (SOURCE / header).read_bytes(), header


def test_headers_include_only_public_headers_and_the_header_only_ffi_api():
    public = {f"xlabind/native/{h}" for h in public_headers()}
    for header in public_headers():
        text = (SOURCE / header).read_text()
        for included in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
            assert included in public | XLA_API, f"{header} includes {included}"
        assert "ffi_api.h" not in re.sub(r"//.*", "", text), header


# Every header with every compiler; in the sampled loop each header with one
# of them (tests/support/cases.py).
COMPILERS = ("g++", "zig")
PAIRS = [
    p.values
    for p in cases.product("test_every_header_compiles_on_its_own", COMPILERS, public_headers())
]


@pytest.mark.parametrize("name", COMPILERS)
def test_every_header_compiles_on_its_own(name, tmp_path):
    """In the wheel's include folder: the checkout's holds the same bytes
    (test_the_list_is_the_folder_and_the_wheel_ships_it) and they include
    only each other and XLA's API (the test above), so it compiles alike."""
    compiler = compilers().get(name)
    if compiler is None:
        pytest.skip(f"no {name} here (the host's g++, or @xlabind_zig)")
    headers = [header for each, header in PAIRS if each == name]
    assert headers, f"no header sampled for {name}"
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        done = list(pool.map(lambda h: compile_alone(compiler, SHIPPED, h, tmp_path), headers))
    failed = {h: d.stderr[-2000:] for h, d in zip(headers, done) if d.returncode != 0}
    assert not failed, f"{name}: headers that do not compile alone: {failed}"


def test_a_header_that_stops_compiling_alone_is_caught(tmp_path):
    """The check above can fail: dtype_names.h without its own include of
    XLA's ffi.h (which it uses) does not compile alone."""
    (name, compiler), *_ = compilers().items()
    include = tmp_path / "include"
    shutil.copytree(SHIPPED, include)
    header = include / "xlabind" / "native" / "dtype_names.h"
    text = header.read_text()
    assert '#include "xla/ffi/api/ffi.h"' in text
    header.write_text(text.replace('#include "xla/ffi/api/ffi.h"', ""))
    done = compile_alone(compiler, include, "dtype_names.h", tmp_path)
    assert done.returncode != 0, f"{name} compiled a header missing an include"
    assert compile_alone(compiler, SHIPPED, "dtype_names.h", tmp_path).returncode == 0


def moved_headers() -> dict[str, str]:
    """{old repository path: the include that replaced it} of every public
    header: the helpers, and the callback handlers' headers."""
    moved = {f"ffi/native/{h}": f"xlabind/native/{h}" for h in public_headers()}
    for platform in ("cpu", "cuda"):
        moved[f"ffi/{platform}/python_callback_handler.h"] = (
            f"xlabind/{platform}/python_callback_handler.h"
        )
    return moved


def test_an_old_path_fails_naming_the_new_one(tmp_path):
    """The repository paths of before 0.5.0 stop the build with the include to
    write instead; the new ones compile from the checkout's include folders
    (a callback handler's header with only XLA's FFI API beside it, as the
    helpers), one translation unit a folder: each helper also compiles alone
    above, from the wheel's copy of the same bytes."""
    (name, compiler), *_ = compilers().items()
    folders: dict[pathlib.Path, list[str]] = {}
    for old, new in moved_headers().items():
        source = tmp_path / "old.cc"
        source.write_text(f'#include "{old}"\n')
        done = subprocess.run(
            [*compiler, "-c", "-o", str(tmp_path / "old.o"), f"-I{RUNFILES}", str(source)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode != 0, (name, old)
        assert f'include \\"{new}\\"' in done.stderr, done.stderr[-1000:]
        folders.setdefault(RUNFILES / old.rsplit("/", 1)[0] / "include", []).append(new)
    assert len(folders) == 3, folders  # the helpers', the CPU handler's, the CUDA handler's
    for include, news in folders.items():
        source = tmp_path / "new.cc"
        source.write_text("".join(f'#include "{new}"\n' for new in news))
        done = subprocess.run(
            [*compiler, "-c", "-o", str(tmp_path / "new.o"), *WARNINGS, f"-I{include}"]
            + ["-isystem", jax.ffi.include_dir(), str(source)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, (name, news, done.stderr[-2000:])


def host_compiler_for_nvcc() -> str | None:
    """A g++ that CUDA 13's nvcc accepts (Debian sid's default gcc is too new)."""
    for name in ("g++-14", "g++-13", "g++-12", "g++"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def test_host_device_h_compiles_for_the_device_with_nvcc(tmp_path):
    nvcc = (runfiles_repos.repository("xlabind_cuda") or RUNFILES.parent / "xlabind_cuda") / "nvcc"
    host = host_compiler_for_nvcc()
    assert nvcc.exists(), nvcc
    assert host, "no g++ for nvcc's host compiler"
    source = tmp_path / "kernel.cu"
    source.write_text(
        '#include "xlabind/native/host_device.h"\n'
        "XLABIND_HOST_DEVICE double Weight(double x) { return 1.0 - x; }\n"
        "__global__ void Kernel(double* y) { y[0] = Weight(y[0]); }\n"
    )
    done = subprocess.run(
        [
            str(nvcc),
            "-ccbin",
            host,
            "-std=c++17",
            "-Werror",
            "all-warnings",
            "-Xcompiler",
            "-Wall,-Wextra,-Werror",
            f"-I{SHIPPED}",
            "-arch=sm_80",
            "-c",
            str(source),
            "-o",
            str(tmp_path / "kernel.o"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
