"""What a compiled extension module says of itself, read from its bytes: the
machine it runs on, the newest glibc symbol version it needs, the dynamic
symbols it exports and those it leaves to the process.

tools/build_wheel.py tags a wheel from these (a module built for another
machine cannot be imported here to ask it), and the tests of the modules
built for other machines (tests/packaging/test_platform_modules.py) check
them. Only what those need of ELF is read: 64-bit little-endian files, their
section headers, the dynamic symbol table and the version needs.
"""

from __future__ import annotations

import re
import struct
import typing

#: ELF e_machine values of the machines xlabind builds for, by the name a
#: wheel's platform tag gives them.
ELF_MACHINES = {62: "x86_64", 183: "aarch64"}

_SHT_DYNSYM = 11
_SHT_GNU_VERNEED = 0x6FFFFFFE
_STB_GLOBAL, _STB_WEAK, _STB_GNU_UNIQUE = 1, 2, 10
_STV_DEFAULT, _STV_PROTECTED = 0, 3


class ElfModule(typing.NamedTuple):
    """An ELF shared object, as far as a wheel's tag and checks need it."""

    #: "x86_64", "aarch64" (ELF_MACHINES), or "EM_<number>" for another.
    machine: str
    #: The newest GLIBC_x.y version its symbols ask for, or None.
    glibc: tuple[int, int] | None
    #: Names of the defined, default- or protected-visibility global symbols.
    exported: frozenset[str]
    #: Names of the symbols another object must define.
    undefined: frozenset[str]


def _string(table: bytes, offset: int) -> str:
    return table[offset : table.index(b"\0", offset)].decode("ascii", "replace")


def read_elf(data: bytes, name: str = "module") -> ElfModule:
    """The ElfModule of `data`, the bytes of the file `name` (for errors)."""
    if data[:4] != b"\x7fELF":
        raise ValueError(
            f"read_elf: {name} is not an ELF file (its first bytes are {data[:4]!r}, "
            "expected b'\\x7fELF')"
        )
    if data[4] != 2 or data[5] != 1:
        raise ValueError(
            f"read_elf: {name} is not 64-bit little-endian ELF "
            f"(EI_CLASS {data[4]}, EI_DATA {data[5]}; expected 2 and 1)"
        )
    (machine,) = struct.unpack_from("<H", data, 18)
    (section_offset,) = struct.unpack_from("<Q", data, 0x28)
    entry_size, count = struct.unpack_from("<HH", data, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", data, section_offset + index * entry_size)
        for index in range(count)
    ]

    def contents(section) -> bytes:
        offset, size = section[4], section[5]
        return data[offset : offset + size]

    exported, undefined, versions = set(), set(), set()
    for section in sections:
        kind, link = section[1], section[6]
        if kind == _SHT_DYNSYM:
            strings = contents(sections[link])
            table = contents(section)
            for offset in range(0, len(table), 24):
                name_offset, info, other, index = struct.unpack_from("<IBBH", table, offset)
                symbol = _string(strings, name_offset)
                if not symbol:
                    continue
                if index == 0:
                    undefined.add(symbol)
                elif info >> 4 in (_STB_GLOBAL, _STB_WEAK, _STB_GNU_UNIQUE) and (
                    other & 3 in (_STV_DEFAULT, _STV_PROTECTED)
                ):
                    exported.add(symbol)
        elif kind == _SHT_GNU_VERNEED:
            strings = contents(sections[link])
            needs = contents(section)
            offset = 0
            while True:
                _, aux_count, _, aux_offset, next_offset = struct.unpack_from(
                    "<HHIII", needs, offset
                )
                aux = offset + aux_offset
                for _ in range(aux_count):
                    _, _, _, name_offset, next_aux = struct.unpack_from("<IHHII", needs, aux)
                    versions.add(_string(strings, name_offset))
                    aux += next_aux
                if not next_offset:
                    break
                offset += next_offset
    glibc = [
        (int(match.group(1)), int(match.group(2)))
        for match in (re.fullmatch(r"GLIBC_(\d+)\.(\d+)", version) for version in versions)
        if match
    ]
    return ElfModule(
        machine=ELF_MACHINES.get(machine, f"EM_{machine}"),
        glibc=max(glibc, default=None),
        exported=frozenset(exported),
        undefined=frozenset(undefined),
    )
