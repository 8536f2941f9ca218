"""The enums xlabind.ops hands its kernels as attributes are the kernels' own:
python/xlabind/ops/modes.py's Mode and Boundary have the names and values of
the C++ enums they stand for (kConstant spelled CONSTANT), read from the
headers that define them."""

import pathlib
import re

import pytest

from xlabind.ops.modes import Boundary, Mode

# tests/native/test_op_enums.py in the checkout, or in Bazel's runfiles.
ROOT = pathlib.Path(__file__).parents[2]
HEADERS = {
    Mode: ROOT / "ffi" / "ops" / "map_coordinates" / "interpolation.h",
    Boundary: ROOT / "ffi" / "ops" / "spline_filter" / "line_filter.h",
}


def cpp_enum(source: str, name: str) -> dict[str, int]:
    """The enumerators of C++ enum `name` in `source`, {kFooBar as FOO_BAR: value}
    (a value left out is the previous one's plus one, as in C++)."""
    found = re.search(rf"\benum\s+(?:class\s+)?{name}\b[^{{;]*\{{([^}}]*)\}}", source)
    if found is None:
        raise LookupError(f"no enum {name} in the source")
    members, value = {}, -1
    for enumerator in filter(None, (e.strip() for e in found.group(1).split(","))):
        constant, _, given = (part.strip() for part in enumerator.partition("="))
        value = int(given, 0) if given else value + 1
        members[re.sub(r"(?<!^)(?=[A-Z])", "_", constant.removeprefix("k")).upper()] = value
    return members


@pytest.mark.parametrize("enum", [Mode, Boundary], ids=lambda e: e.__name__)
def test_the_python_enum_is_the_headers(enum):
    header = HEADERS[enum]
    assert cpp_enum(header.read_text(), enum.__name__) == {m.name: m.value for m in enum}, header


def test_cpp_enum_reads_each_spelling():
    source = "namespace a {\nenum Mode : int32_t { kConstant = 0, kGridWrap = 0x5, kNext };\n}"
    assert cpp_enum(source, "Mode") == {"CONSTANT": 0, "GRID_WRAP": 5, "NEXT": 6}
    assert cpp_enum("enum class Boundary {\n  kMirror,\n  kWrap,\n};", "Boundary") == {
        "MIRROR": 0,
        "WRAP": 1,
    }
    with pytest.raises(LookupError, match="no enum Mode"):
        cpp_enum("enum Modes { kA };", "Mode")


def test_each_boundary_continues_a_line_as_its_mode():
    assert [b.mode for b in Boundary] == [Mode.MIRROR, Mode.REFLECT, Mode.WRAP]
