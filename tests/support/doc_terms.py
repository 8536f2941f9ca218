"""The glossary's terms (docs/glossary.md) as the pages' prose spells them,
and where each is first used on a page: the prose only, not headings, code,
directives, inline code, math, roles or the text of links.

    python3 tests/support/doc_terms.py docs/semantics.md ...   # first uses
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import sys

# {term: how the prose spells it}; JVP and VJP are matched in capitals only.
TERMS = {
    "XLA FFI handler": r"(?:XLA )?FFI handlers?",
    "FFI target": r"FFI targets?",
    "custom call": r"custom calls?",
    "cotangent": r"cotangents?",
    "in place": r"in[ -]place",
    "instantiate stage": r"instantiate stages?",
    "JVP": r"(?-i:JVPs?)",
    "VJP": r"(?-i:VJPs?)",
    "lowering": r"lowering",
    "mesh": r"mesh(?:es)?",
    "primitive": r"primitives?",
    "pytree": r"pytrees?",
    "sharding rule": r"sharding rules?",
    "side effect": r"side effects?",
    "summed factor": r"summed factors?",
    "tangent": r"tangents?",
    "transpose": r"transposes?",
    "vmap method": r"vmap methods?",
}
PATTERN = re.compile(
    r"(?i)\b(?:" + "|".join(f"(?P<t{k}>{p})" for k, p in enumerate(TERMS.values())) + r")\b"
)
# Spans of a prose line that are not prose: a role with its text, inline
# code, math, a link's text and target, an HTML tag.
_NOT_PROSE = re.compile(
    r"\{[\w:-]+\}`[^`]*`|`[^`]*`|\$[^$]*\$|\[[^\]]*\]\([^)]*\)"
    r"|\[[^\]]*\]|<[^>]*>"
)
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_TERM_ROLE = re.compile(r"\{term\}`(?:[^`<]*<(?P<target>[^>]+)>|(?P<text>[^`]+))`")


@dataclasses.dataclass(frozen=True)
class Use:
    term: str
    line: int  # 1-based
    start: int  # column in the line
    end: int
    linked: bool  # the use is a {term} role


def _prose_lines(text: str):
    """(line number, line) of the page's prose lines."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        opening = _FENCE.match(line)
        if fence is None and opening:
            fence = opening.group(1)
            continue
        if fence is not None:
            if line.strip() == fence:
                fence = None
            continue
        if line.startswith("#") or re.match(r"^\(.*\)=\s*$", line):  # headings, labels
            continue
        yield number, line


def first_uses(page: pathlib.Path) -> dict[str, Use]:
    """The first use of each glossary term in `page`'s prose."""
    found: dict[str, Use] = {}
    for number, line in _prose_lines(page.read_text()):
        for role in _TERM_ROLE.finditer(line):
            term = (role.group("target") or role.group("text")).strip()
            canonical = next((t for t in TERMS if t.lower() == term.lower()), term)
            found.setdefault(canonical, Use(canonical, number, role.start(), role.end(), True))
        masked = _NOT_PROSE.sub(lambda m: " " * len(m.group(0)), line)
        for match in PATTERN.finditer(masked):
            term = list(TERMS)[int(match.lastgroup[1:])]
            use = Use(term, number, match.start(), match.end(), False)
            previous = found.get(term)
            if previous is None or (previous.line, previous.start) > (use.line, use.start):
                found[term] = use
    return found


if __name__ == "__main__":
    for argument in sys.argv[1:]:
        for term, use in sorted(first_uses(pathlib.Path(argument)).items()):
            print(f"{argument}:{use.line}: {term} {'linked' if use.linked else 'NOT LINKED'}")
