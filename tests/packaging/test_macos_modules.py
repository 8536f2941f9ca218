"""The package's compiled modules as the macOS arm64 build makes them
(//tools/platforms:macos_arm64_modules: zig cross-compiles them in this
build), read from their bytes with Debian's LLVM tools: thin arm64 Mach-O
files for macOS 11 and later, loading libSystem alone, exporting their init
function, and leaving undefined only what libSystem (zig's stub of it) or
CPython's API defines. No wheel is built from them yet
(docs/development/wheels.md, "macOS"): what keeps them from one is held
here as an expected failure."""

import pathlib
import re
import shutil
import subprocess

import pytest
import runfiles_repos

RUNFILES = pathlib.Path(__file__).parents[2]
MODULES = RUNFILES / "tools" / "platforms" / "macos_arm64_modules"
NAMES = ("_xlabind.so", "_xlabind_ops.so")
TOOLS = ("llvm-readobj", "llvm-nm")

pytestmark = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in TOOLS),
    reason="Debian's LLVM tools (llvm-readobj, llvm-nm) are not installed: apt-get install llvm",
)


def run(*command: str) -> str:
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def symbols(name: str, *options: str) -> set[str]:
    lines = run("llvm-nm", "--just-symbol-name", *options, str(MODULES / name)).splitlines()
    return {line.strip() for line in lines if line.strip()}


def exported(name: str) -> set[str]:
    return symbols(name, "--extern-only", "--defined-only")


def test_the_package_has_the_cpu_modules_and_no_cuda_one():
    assert sorted(path.name for path in MODULES.iterdir()) == list(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_each_module_is_thin_arm64_macho_for_macos_11(name):
    headers = run("llvm-readobj", "--file-headers", "--macho-version-min", str(MODULES / name))
    assert "Format: Mach-O arm64" in headers and "Arch: aarch64" in headers, headers
    assert "Platform: macos" in headers, headers
    version = re.search(r"^\s*Version: (\d+)\.(\d+)", headers, flags=re.M)
    assert version and (int(version.group(1)), int(version.group(2))) <= (11, 0), headers


@pytest.mark.parametrize("name", NAMES)
def test_each_module_loads_libsystem_alone(name):
    listing = run("llvm-readobj", "--needed-libs", str(MODULES / name))
    libraries = re.findall(r"^\s+(/\S+|@\S+)$", listing, flags=re.M)
    # The module's own name (LC_ID_DYLIB) is listed beside what it loads.
    assert sorted(libraries) == sorted(["/usr/lib/libSystem.B.dylib", f"@rpath/{name}"])


@pytest.mark.parametrize("name", NAMES)
def test_each_module_exports_its_init_function(name):
    assert f"_PyInit_{name.removesuffix('.so')}" in exported(name)


@pytest.mark.parametrize("name", NAMES)
def test_what_each_module_leaves_undefined_is_libsystems_or_cpythons(name):
    zig = runfiles_repos.repository("xlabind_zig")
    stub = (zig / "site/ziglang/lib/libc/darwin/libSystem.tbd").read_text()
    libsystem = set(re.findall(r"[\w$.]+", stub))
    undefined = symbols(name, "--undefined-only")
    assert undefined, name
    # CPython's API: found in the interpreter at load time (-undefined dynamic_lookup).
    stray = {s for s in undefined if s not in libsystem and not s.startswith(("_Py", "__Py"))}
    assert stray == set(), (name, sorted(stray))


@pytest.mark.xfail(
    strict=True,
    reason="zig 0.14.1's Mach-O linker has no -exported_symbols_list: libc++'s "
    "operator new/delete and ___dso_handle are exported beside the module's own "
    "symbols (one reason no macOS wheel is built yet)",
)
@pytest.mark.parametrize("name", NAMES)
def test_no_cpp_runtime_symbol_is_exported(name):
    own = {s for s in exported(name) if s.startswith(("_PyInit_", "_Xlabind"))}
    # The dylib's own header, which every Mach-O dylib defines.
    assert exported(name) - own - {"__mh_dylib_header"} == set(), name
