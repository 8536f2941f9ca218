"""Which earlier Python blocks of a page a block needs to run: those that
bind the names it reads and does not bind itself (imports, assignments,
definitions), the latest binding of each, and what those need in turn.

The site notes them above each block, linked (block_notes.py), and the docs
test runs each block with exactly them (tests/support/doc_blocks.py), so a
reader who lands on a block knows what to run first, and the note cannot
be wrong.
"""

from __future__ import annotations

import ast
import builtins

_ALWAYS_BOUND = set(dir(builtins)) | {"__name__", "__file__"}


def names(code: str) -> tuple[set[str], set[str]]:
    """(the names `code` binds, the names it reads without binding them)."""
    bound: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound, read - bound - _ALWAYS_BOUND


def needs(codes: list[str]) -> list[list[int]]:
    """For each block of `codes` (a page's, in order), the indices of the
    earlier blocks it needs, in order; a name no earlier block binds needs
    nothing (running the block then raises NameError)."""
    analysed = [names(code) for code in codes]
    direct: list[set[int]] = []
    for i, (_, read) in enumerate(analysed):
        binders = set()
        for name in read:
            binder = next((j for j in range(i - 1, -1, -1) if name in analysed[j][0]), None)
            if binder is not None:
                binders.add(binder)
        direct.append(binders)
    closed = []
    for i in range(len(codes)):
        seen: set[int] = set()
        stack = list(direct[i])
        while stack:
            j = stack.pop()
            if j not in seen:
                seen.add(j)
                stack.extend(direct[j])
        closed.append(sorted(seen))
    return closed
