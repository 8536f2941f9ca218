"""What a handler author may use from xlabind's helper headers (ffi/native/*.h),
read from the headers themselves: each header's opening comment, and its
public names with their declarations and the comments above them. The docs'
native reference is generated from this, and tests/docs checks the
hand-written helper table against it.

Public: a declaration at the top level of namespace xlabind::native (not in
a namespace ending in "internal"), or an XLABIND_* macro other than the
include guard and those ending in "_" (a public macro's own parts)."""

from __future__ import annotations

import dataclasses
import pathlib
import re

_DECLARATION = (
    re.compile(r"#define (XLABIND_\w*[A-Z0-9])[( ]"),
    re.compile(r"(?:class|struct) (\w+)"),
    re.compile(r"inline constexpr [\w: *]+?\b(\w+)(\[\])? ="),
    re.compile(r"(?:inline )?\w[\w:<>, *&]*?[ *&](\w+)\("),
)


@dataclasses.dataclass
class Helper:
    name: str
    declaration: str  # the line that declares it (with a template line above)
    comment: str  # the comment lines just above, without the slashes


@dataclasses.dataclass
class Header:
    path: pathlib.Path
    comment: str  # the header's opening comment
    helpers: list[Helper]

    @property
    def name(self) -> str:
        return self.path.name


def _comment_above(lines: list[str], k: int) -> str:
    comment = []
    while k >= 0 and lines[k].lstrip().startswith("//"):
        comment.insert(0, lines[k].lstrip()[2:].removeprefix(" "))
        k -= 1
    return "\n".join(comment)


def _declaration_end(lines: list[str], k: int) -> int:
    """The last line of the declaration starting at line k: a macro's first
    line; a function's signature to its closing parenthesis."""
    if lines[k].startswith("#define"):
        return k
    depth = 0
    for j in range(k, len(lines)):
        depth += lines[j].count("(") - lines[j].count(")")
        if depth <= 0:
            return j
    return k


def read(path: pathlib.Path) -> Header:
    lines = path.read_text().splitlines()
    opening = []
    for line in lines:
        if not line.startswith("//"):
            break
        opening.append(line[2:].removeprefix(" "))
    helpers, seen, hidden = [], set(), False
    for k, line in enumerate(lines):
        if re.match(r"namespace \w*internal \{", line):
            hidden = True
        elif re.match(r"\}  // namespace \w*internal", line):
            hidden = False
        elif not hidden and not line.startswith(("namespace", "template", "}")):
            found = next((m for m in (p.match(line) for p in _DECLARATION) if m), None)
            if found and found.group(1) not in seen:
                seen.add(found.group(1))
                first = k - 1 if k and lines[k - 1].startswith("template") else k
                declaration = "\n".join(lines[first : _declaration_end(lines, k) + 1])
                helpers.append(
                    Helper(found.group(1), declaration, _comment_above(lines, first - 1))
                )
    return Header(path, "\n".join(opening), helpers)


def headers(folder: pathlib.Path) -> list[Header]:
    return [read(path) for path in sorted(folder.glob("*.h"))]
