"""Sphinx extension: where a page's Python block needs earlier ones
(block_needs.py), a note above it names and links them ("Needs block 1
(Setting up) first."), so a reader who lands on the block knows what to run
before it; and a page with several blocks offers its code as one script,
_scripts/<page>.py, linked under its title.

Blocks count as the docs test counts them (tests/support/doc_blocks.py):
the page's own ```python blocks (not included files), chained by where they
run (here, on a GPU, in several processes); the script leaves out the
multi-process ones, which need processes of their own.
"""

from __future__ import annotations

import pathlib

import block_needs
from docutils import nodes

_PLACES = ("gpu", "multiprocess")


def _place(block: nodes.literal_block) -> str:
    return next((p for p in _PLACES if p in block.get("classes", [])), "here")


def _section_title(node: nodes.Node) -> str:
    while node is not None and not isinstance(node, nodes.section):
        node = node.parent
    if node is None:
        return ""
    return node.next_node(nodes.title).astext()


def _script_path(docname: str) -> str:
    """The page's script, relative to the page."""
    return "../" * docname.count("/") + f"_scripts/{docname}.py"


def _note(
    needed: list[int], blocks: list[nodes.literal_block], script: str | None
) -> nodes.paragraph:
    note = nodes.paragraph(classes=["xlabind-needs"])
    note += nodes.Text("Needs block " if len(needed) == 1 else "Needs blocks ")
    for n, k in enumerate(needed):
        if n:
            note += nodes.Text(", ")
        note += nodes.reference("", f"{k + 1}", internal=True, refid=f"code-{k + 1}")
        note += nodes.Text(f" ({_section_title(blocks[k])})")
    if script is None:
        note += nodes.Text(" first.")
    else:
        note += nodes.Text(" first, or run ")
        note += nodes.reference("", "the page's script", refuri=script)
        note += nodes.Text(".")
    return note


def _script(docname: str, title: str, blocks: list[nodes.literal_block]) -> str:
    lines = [
        f"# {title}: the Python blocks of xlabind's docs page {docname}, in order.",
        "# Blocks marked for a GPU need one; those for several processes are left out.",
    ]
    for k, block in enumerate(blocks):
        if _place(block) == "multiprocess":
            continue
        where = " (GPU)" if _place(block) == "gpu" else ""
        lines += ["", f"# --- block {k + 1}{where}: {_section_title(block)}", block.astext()]
    return "\n".join(lines) + "\n"


def _annotate(app, doctree: nodes.document) -> None:
    docname = app.env.docname
    blocks = [
        block
        for block in doctree.findall(nodes.literal_block)
        if block.get("language") == "python" and block.get("source") is None
    ]
    for k, block in enumerate(blocks):
        block["ids"].append(f"code-{k + 1}")
    runnable = [block for block in blocks if _place(block) != "multiprocess"]
    title = doctree.next_node(nodes.title)
    script = _script_path(docname) if len(runnable) >= 2 and title is not None else None
    for place in ("here", *_PLACES):
        chain = [k for k, block in enumerate(blocks) if _place(block) == place]
        for i, needed in enumerate(block_needs.needs([blocks[k].astext() for k in chain])):
            if needed:
                block = blocks[chain[i]]
                note = _note([chain[j] for j in needed], blocks, script)
                block.parent.insert(block.parent.index(block), note)
    if script is None:
        return
    written = pathlib.Path(app.outdir) / "_scripts" / f"{docname}.py"
    written.parent.mkdir(parents=True, exist_ok=True)
    written.write_text(_script(docname, title.astext(), blocks))
    link = nodes.paragraph(classes=["xlabind-script"])
    link += nodes.Text("This page's code as one script: ")
    link += nodes.reference("", f"{pathlib.PurePath(docname).name}.py", refuri=script)
    title.parent.insert(title.parent.index(title) + 1, link)


def setup(app):
    app.connect("doctree-read", _annotate)
    return {"parallel_read_safe": False, "parallel_write_safe": True}
