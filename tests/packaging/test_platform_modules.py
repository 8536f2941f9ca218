"""The package's compiled modules as the Linux aarch64 build makes them
(//tools/platforms:linux_aarch64_modules: zig cross-compiles them in this
build), read from their bytes (tools/build_wheel.py's ELF reader, and the
dynamic symbols below), since this machine cannot import them: an aarch64
ELF file each, needing glibc 2.17 at most (the manylinux2014 baseline),
exporting only its init function and xlabind's FFI handlers, and carrying its
own C++ runtime; and no CUDA module (the pinned CUDA wheels are x86-64 Linux
ones)."""

import re
import shutil
import struct
import subprocess

import pytest
from wheel_tools import RUNFILES, load_tool

packer = load_tool("build_wheel")

MODULES = RUNFILES / "tools" / "platforms" / "linux_aarch64_modules"
NAMES = ("_xlabind.so", "_xlabind_ops.so")


def read(name: str):
    """The module's (machine, newest glibc), as the packer tags a wheel from them."""
    return packer.read_elf((MODULES / name).read_bytes(), name)


def dynamic_symbols(name: str) -> tuple[set[str], set[str]]:
    """The module's exported symbols (defined; global, weak or unique binding;
    default or protected visibility) and those it leaves to the process."""
    exported, undefined = set(), set()
    for kind, table, strings in packer.elf_sections((MODULES / name).read_bytes(), name):
        for offset in range(0, len(table) if kind == 11 else 0, 24):  # SHT_DYNSYM's Elf64_Sym
            name_offset, info, other, index = struct.unpack_from("<IBBH", table, offset)
            symbol = packer.elf_string(strings, name_offset)
            if symbol and index == 0:
                undefined.add(symbol)
            elif symbol and info >> 4 in (1, 2, 10) and other & 3 in (0, 3):
                exported.add(symbol)
    return exported, undefined


def test_the_package_has_the_cpu_modules_and_no_cuda_one():
    assert sorted(path.name for path in MODULES.iterdir()) == list(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_each_module_is_aarch64_and_needs_glibc_2_17_at_most(name):
    machine, glibc = read(name)
    assert machine == "aarch64", name
    assert glibc is not None and glibc <= (2, 17), (name, glibc)


def test_only_the_init_functions_and_the_handlers_are_exported():
    callbacks = dynamic_symbols("_xlabind.so")[0]
    assert "PyInit__xlabind" in callbacks and "XlabindCpuPythonCallback" in callbacks
    assert {s for s in callbacks if not s.startswith(("PyInit_", "Xlabind"))} == set()
    # The ops' handlers travel as capsules (ffi/module_exports.lds).
    assert dynamic_symbols("_xlabind_ops.so")[0] == {"PyInit__xlabind_ops"}


@pytest.mark.parametrize("name", NAMES)
def test_each_module_carries_its_own_cpp_runtime(name):
    # libc++ is linked in, hidden: no C++ symbol is left for the process to
    # define (a libstdc++ there would otherwise answer).
    assert {s for s in dynamic_symbols(name)[1] if s.startswith("_Z")} == set(), name


@pytest.mark.parametrize("name", NAMES)
def test_the_reader_agrees_with_binutils_readelf(name):
    readelf = shutil.which("readelf")
    assert readelf, "binutils' readelf is not on PATH (it comes with gcc)"

    def listing(option: str) -> str:
        command = [readelf, option, "--wide", str(MODULES / name)]
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout

    symbols = listing("--dyn-syms")
    exported, undefined = set(), set()
    for line in symbols.splitlines():
        fields = line.split()
        if len(fields) < 8 or not fields[0].rstrip(":").isdigit():
            continue
        symbol = fields[7].split("@")[0]
        if fields[6] == "UND":
            undefined.add(symbol)
        elif fields[4] in ("GLOBAL", "WEAK", "UNIQUE") and fields[5] in ("DEFAULT", "PROTECTED"):
            exported.add(symbol)
    versions = listing("--version-info")
    glibc = max(
        tuple(int(part) for part in version.split("_")[1].split("."))
        for version in set(re.findall(r"GLIBC_[\d.]+\d", versions))
    )
    assert (*dynamic_symbols(name), read(name)[1]) == (exported, undefined, glibc)


def test_the_reader_refuses_what_is_not_an_elf_file(tmp_path):
    with pytest.raises(ValueError, match=r"read_elf: notes\.txt is not an ELF file"):
        packer.read_elf(b"plain text", "notes.txt")
    with pytest.raises(ValueError, match=r"read_elf: old\.so is not 64-bit little-endian"):
        packer.read_elf(b"\x7fELF\x01\x01" + bytes(58), "old.so")
