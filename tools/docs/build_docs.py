"""Builds xlabind's documentation site with Sphinx, warnings as errors, into a
zip of its HTML (what `tools/bazel build //tools/docs:html` makes).

The pages are generated here from their one source each, so nothing drifts:

* the guides are README.md's chapters (one page per "## " heading; the
  README's code blocks keep running in tests/test_readme.py), with every
  backticked public name (`xlabind.callback`) turned into a link to the
  reference;
* the API reference documents every public name of xlabind, xlabind.cuda,
  xlabind.ops and xlabind.jaxbind (their ``__all__``) from its docstring
  and signature; constants from their ``#:`` comments;
* the native reference is each ffi/native/ header's own opening comment,
  the README's table of helpers (tests/test_readme.py checks it against the
  headers), and the docstrings of the Bazel macros in ffi/defs.bzl and
  repositories.bzl.

    build_docs.py --out html.zip [--workdir DIR]
"""

from __future__ import annotations

import argparse
import ast
import inspect
import os
import pathlib
import re
import shutil
import sys
import tempfile
import zipfile

HERE = pathlib.Path(__file__).resolve().parent
# The runfiles (Bazel) or the checkout: the folder holding README.md.
REPO = next(p for p in [HERE.parent.parent, *HERE.parents] if (p / "README.md").exists())
MODULES = ["xlabind", "xlabind.ops", "xlabind.cuda", "xlabind.jaxbind"]
# Macros other workspaces call, by file.
BAZEL_MACROS = {"ffi/defs.bzl": ["xlabind_ffi_library", "xlabind_extension"],
                "repositories.bzl": ["xlabind_dependencies", "xlabind_register_zig_toolchain"]}


def public_api() -> dict[str, list[str]]:
    """{module: its public names}, importing xlabind."""
    import importlib
    return {name: list(importlib.import_module(name).__all__) for name in MODULES}


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def data_comment(obj_name: str, module) -> str:
    """The ``#:`` comment above `obj_name`'s assignment in the module that
    defines it (autodoc's convention for constants)."""
    for candidate in [module, *sys.modules.values()]:
        if not getattr(candidate, "__name__", "").startswith("xlabind"):
            continue
        try:
            lines = inspect.getsource(candidate).splitlines()
        except (OSError, TypeError):
            continue
        for k, line in enumerate(lines):
            if re.match(rf"{obj_name}\s*(:[^=]*)?=", line):
                comment = []
                j = k - 1
                while j >= 0 and lines[j].startswith("#:"):
                    comment.insert(0, lines[j][2:].removeprefix(" ").rstrip())
                    j -= 1
                if comment:
                    return "\n".join(comment)
    return ""


def api_page(api: dict[str, list[str]]) -> str:
    import importlib
    out = ["API reference", "=============", "",
           "Every public name, from its docstring. The guides link here.", ""]
    for module_name, names in api.items():
        module = importlib.import_module(module_name)
        out += [module_name, "-" * len(module_name), "", f".. py:module:: {module_name}", ""]
        summary = (inspect.getdoc(module) or "").split("\n\n")[0]
        out += ["::", "", *("   " + line for line in summary.splitlines()), ""]
        for name in names:
            obj = getattr(module, name)
            full = f"{module_name}.{name}"
            if inspect.isclass(obj) and getattr(obj, "__module__", "").startswith("xlabind._"):
                # A compiled (nanobind) type: its docstring, without introspection.
                out += [f".. py:class:: {name}", "", *indent(inspect.getdoc(obj) or ""), ""]
            elif inspect.isclass(obj):
                out += [f".. autoclass:: {full}", "   :members:", ""]
            elif callable(obj):
                out += [f".. autofunction:: {full}", ""]
            else:
                text = data_comment(name, module)
                out += [f".. py:data:: {name}", "", *indent(text), "",
                        *indent(f"Value: ``{short_repr(obj)}``"), ""]
    return "\n".join(out)


def short_repr(obj) -> str:
    text = repr(obj)
    return text if len(text) < 200 else text[:197] + "..."


def indent(text: str, by: str = "   ") -> list[str]:
    return [by + line if line else "" for line in text.splitlines()]


# -- guides: README's chapters ---------------------------------------------------
def readme_chapters() -> tuple[str, list[tuple[str, str]]]:
    """(the README before its first chapter, [(title, body) per "## " chapter])."""
    text = (REPO / "README.md").read_text()
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return parts[0], [(parts[k].strip(), parts[k + 1]) for k in range(1, len(parts), 2)]


def lexer(name: str) -> str:
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound
    try:
        get_lexer_by_name(name)
        return name
    except ClassNotFound:
        return {"starlark": "python"}.get(name, "text")


def markdown_for_sphinx(body: str, api: dict[str, list[str]]) -> str:
    """README markdown as MyST: one heading level up, code blocks with their
    file names as captions, public names linked to the reference."""
    public = {f"{module}.{name}" for module, names in api.items() for name in names}
    out, fence = [], None
    for line in body.splitlines():
        opening = re.match(r"^```(\w*)\s*(\S*)\s*$", line)
        if fence is None and opening:
            language, path = opening.groups()
            fence = "```"
            if "/" in path or "." in path:  # a file's name (not a tag such as "sh test")
                out += [f"```{{code-block}} {lexer(language or 'text')}", f":caption: {path}", ""]
            else:
                out.append(f"```{lexer(language) if language else 'text'}")
            continue
        if fence is not None:
            out.append(line)
            if line.strip() == "```":
                fence = None
            continue
        heading = re.match(r"^(#{3,6}) (.*)$", line)
        if heading:
            out.append("#" * (len(heading.group(1)) - 1) + " " + heading.group(2))
            continue

        def link(match):
            name, call = match.group(1), match.group(2)
            if name not in public:
                return match.group(0)
            if call:  # `xlabind.callback(fn, ...)`: the whole text, linked to the name
                return f"{{py:obj}}`{name}{call} <{name}>`"
            return f"{{py:obj}}`{name}`"

        out.append(re.sub(r"`(xlabind(?:\.\w+)+)(\([^`<>]*\))?`", link, line))
    return "\n".join(out) + "\n"


# -- the native reference ----------------------------------------------------------
def header_comment(path: pathlib.Path) -> str:
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("//"):
            break
        lines.append(line[2:].removeprefix(" "))
    return "\n".join(lines)


def bazel_macros() -> list[tuple[str, str, str]]:
    """(file, signature, docstring) of each public macro (Starlark parses as Python)."""
    found = []
    for file, names in BAZEL_MACROS.items():
        tree = ast.parse((REPO / file).read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name in names:
                signature = f"{node.name}({ast.unparse(node.args)})"
                found.append((file, signature, ast.get_docstring(node) or ""))
        missing = set(names) - {sig.split("(")[0] for f, sig, _ in found if f == file}
        if missing:
            raise SystemExit(f"build_docs: {file} defines no {sorted(missing)}")
    return found


def native_page(helpers_table: str) -> str:
    out = ["# Native reference", "",
           "What a C++ or CUDA handler author uses: the helper headers in `ffi/native/` "
           "(header-only, namespace `xlabind::native`, from `@xlabind//ffi:native_helpers`) "
           "and the Bazel macros. Generated from the sources.", "",
           "## Helpers, by header", "", helpers_table.strip(), ""]
    for header in sorted((REPO / "ffi" / "native").glob("*.h")):
        out += [f"### `{header.name}`", "", "```text", header_comment(header), "```", ""]
    out += ["## Bazel macros", ""]
    for file, signature, doc in bazel_macros():
        out += [f"### `{signature.split('(')[0]}`", "", f"From `{file}`:", "",
                "```python", f"{signature}", "```", "", "```text", doc, "```", ""]
    return "\n".join(out)


def helpers_table(chapters: list[tuple[str, str]]) -> str:
    native = dict(chapters)["Writing a native op"]
    table = re.search(r"#### Helpers for handlers.*?\n(\| header.*?)\n\n", native, flags=re.S)
    if table is None:
        raise SystemExit("build_docs: README has no table of helpers for handlers")
    return table.group(1)


# -- the site ----------------------------------------------------------------------
def write_sources(source: pathlib.Path) -> None:
    api = public_api()
    intro, chapters = readme_chapters()
    (source / "api.rst").write_text(api_page(api))
    (source / "native.md").write_text(native_page(helpers_table(chapters)))
    pages = []
    for title, body in chapters:
        name = "guide-" + slug(title)
        pages.append(name)
        (source / f"{name}.md").write_text(f"# {title}\n" + markdown_for_sphinx(body, api))
    toctree = "\n".join(["```{toctree}", ":maxdepth: 2", ":caption: Guides", "", *pages, "```",
                         "", "```{toctree}", ":maxdepth: 2", ":caption: Reference", "", "api",
                         "native", "```"])
    index = markdown_for_sphinx(intro, api).replace("\n# xlabind", "# xlabind", 1)
    (source / "index.md").write_text(index.strip() + "\n\n" + toctree + "\n")
    shutil.copy(HERE / "conf.py", source / "conf.py")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the zip of the HTML site to write")
    parser.add_argument("--workdir", help="where to build (default: a temporary folder)")
    args = parser.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    work = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="xlabind-docs-"))
    source, html = work / "source", work / "html"
    shutil.rmtree(work, ignore_errors=True)
    source.mkdir(parents=True)
    write_sources(source)
    from sphinx.cmd.build import build_main
    status = build_main(["-W", "--keep-going", "-q", "-b", "html", "-d", str(work / "doctrees"),
                         str(source), str(html)])
    if status:
        return status
    with zipfile.ZipFile(args.out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(html.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(html).as_posix())
    return 0


if __name__ == "__main__":
    sys.exit(main())
