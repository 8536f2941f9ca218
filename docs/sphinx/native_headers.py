"""What a handler author may use from xlabind's helper headers
(ffi/native/include/xlabind/native/*.h), read from the headers themselves: each
header's opening comment, and its public names with their declarations and the
comments above them. The docs' native reference is generated from this, and
tests/docs checks the hand-written helper table against it.

Public: a declaration at the top level of namespace xlabind::native (not in
a namespace ending in "internal"), or an XLABIND_* macro other than the
include guard and those ending in "_" (a public macro's own parts)."""

from __future__ import annotations

import dataclasses
import pathlib
import re

#: The headers' folder, from the repository's root: the path they are
#: included by, under ffi/native/include.
FOLDER = pathlib.PurePosixPath("ffi/native/include/xlabind/native")

_DECLARATION = (
    re.compile(r"#define (XLABIND_\w*[A-Z0-9])[( ]"),
    re.compile(r"(?:class|struct) (\w+)"),
    re.compile(r"inline constexpr [\w: *]+?\b(\w+)(\[\])? ="),
    re.compile(r"(?:inline )?\w[\w:<>, *&]*?[ *&](\w+)\("),
)


_SECTIONS = ("Args:", "Returns:", "Example:")

#: The widest line of code the docs show (docs/development/docs.md: 88
#: columns; the headers' own limit is 100): a declaration wider than this is
#: wrapped for the page (Helper.shown).
WIDTH = 88


@dataclasses.dataclass
class Doc:
    """A helper's doc comment, read as its sections: the text up to the first
    section, then "Args:" (one "  name: text" a parameter, continued by
    deeper-indented lines), "Returns:" and "Example:" (code)."""

    summary: str
    args: dict[str, str]
    returns: str
    example: str


def _parse_doc(comment: str) -> Doc:
    parts: dict[str, list[str]] = {"": []}
    section = ""
    for line in comment.splitlines():
        if line in _SECTIONS:
            section = line
            parts[section] = []
        else:
            parts[section].append(line)
    args: dict[str, str] = {}
    for line in parts.get("Args:", []):
        entry = re.match(r"  (\w+): (.*)", line)
        if entry:
            args[entry.group(1)] = entry.group(2)
        elif args and line.startswith("    "):
            last = list(args)[-1]
            args[last] += " " + line.strip()
        else:
            raise ValueError(f"not an argument's line: {line!r}")

    def dedented(lines: list[str]) -> str:
        return "\n".join(line.removeprefix("  ") for line in lines).strip()

    return Doc(
        summary="\n".join(parts[""]).strip(),
        args=args,
        returns=" ".join(line.strip() for line in parts.get("Returns:", [])),
        example=dedented(parts.get("Example:", [])),
    )


def _closing(text: str, start: int) -> int:
    """The index of the parenthesis that closes the one at text[start]."""
    depth = 0
    for k in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[k], 0)
        if depth == 0:
            return k
    raise ValueError(f"no closing parenthesis: {text!r}")


def _packed(head: str, parts: list[str], tail: str, width: int) -> list[str]:
    """head + parts (comma-separated) + tail in lines of at most width
    columns where the parts allow, as clang-format packs a parameter list:
    after the opening parenthesis, continued at its column, or on the next
    lines indented 4 where the head leaves too little room."""
    one = head + ", ".join(parts) + tail
    if len(one) <= width or not parts:
        return [one]
    pieces = [part + "," for part in parts[:-1]] + [parts[-1] + tail]
    indent = len(head)
    lines = [head]
    if indent + max(map(len, pieces)) > width:
        indent, lines = 4, [head.rstrip(), ""]
    lines[-1] += " " * (indent - len(lines[-1]))
    fresh = True  # nothing after the indent yet
    for piece in pieces:
        if fresh or len(lines[-1]) + 1 + len(piece) <= width:
            lines[-1] += ("" if fresh else " ") + piece
        else:
            lines.append(" " * indent + piece)
        fresh = False
    return lines


def _top_level_split(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char in "(<[{":
            depth += 1
        elif char in ")>]}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [part.strip() for part in parts + [current] if part.strip()]


@dataclasses.dataclass
class Helper:
    name: str
    declaration: str  # the line that declares it (with a template line above)
    comment: str  # the comment lines just above, without the slashes

    @property
    def _signature(self) -> str:
        """The declaration without its template line."""
        lines = self.declaration.split("\n")
        return "\n".join(lines[1:] if lines[0].startswith("template") else lines)

    @property
    def kind(self) -> str:
        """ "function", "macro" (function-like), or "other" (a type, a constant,
        an object-like macro)."""
        text = self._signature
        if text.startswith("#define"):
            return "macro" if re.match(r"#define \w+\(", text) else "other"
        if re.match(r"(class|struct) |inline constexpr ", text):
            return "other"
        return "function"

    @property
    def parameters(self) -> list[str]:
        """The names of a function's or a function-like macro's parameters."""
        if self.kind == "other":
            return []
        text = self.declaration
        start = text.index(self.name + "(") + len(self.name) + 1
        depth, end = 1, start
        while depth:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        names = []
        for parameter in _top_level_split(text[start : end - 1]):
            names.append(re.findall(r"\w+", parameter.split("=")[0])[-1])
        return names

    @property
    def returns_value(self) -> bool:
        return self.kind == "function" and not re.match(r"(inline )?void ", self._signature)

    @property
    def doc(self) -> Doc:
        return _parse_doc(self.comment)

    @property
    def shown(self) -> str:
        """The declaration as the docs show it: without a macro's line
        continuation, an opening brace or a function's one-line body; a
        function's signature wider than WIDTH columns wrapped at WIDTH (the
        header's own wrapping kept where it fits)."""
        lines = [
            line.rstrip().rstrip("\\").rstrip().removesuffix("{").rstrip()
            for line in self.declaration.splitlines()
        ]
        if self.kind != "function":
            return "\n".join(lines)
        template = lines[:1] if lines[0].startswith("template") else []
        signature = " ".join(" ".join(lines[len(template) :]).split())
        start = signature.index(self.name + "(") + len(self.name)
        end = _closing(signature, start)
        after = signature[end + 1 :]
        body = "{" in after
        if not body and max(map(len, lines)) <= WIDTH:
            return "\n".join(lines)
        tail = ")" + after.split("{", 1)[0].rstrip()
        parts = _top_level_split(signature[start + 1 : end])
        return "\n".join(template + _packed(signature[: start + 1], parts, tail, WIDTH))


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
