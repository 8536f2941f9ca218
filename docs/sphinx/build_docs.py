"""Builds xlabind's documentation site with Sphinx, warnings as errors, into a
zip of its HTML (what `tools/bazel build //docs/sphinx:html` makes).

The pages are docs/ (one MyST file each). Added to them here, so that nothing
is written twice:

* the API reference of xlabind, xlabind.ops, xlabind.cuda and xlabind.jaxbind,
  one page per module (api/<module>.md), from each public name's docstring
  and signature (constants and type aliases from their ``#:`` comments),
  opening with a summary table;
* the native helpers (api/native-helpers.md), from their headers: each
  header's opening comment, each public name's declaration and comment;
* the Bazel macros (api/bazel-macros.md), from their docstrings in
  ffi/defs.bzl and repositories.bzl;
* the figures (figures.py: charts from docs/figure_data/, two diagrams) as
  /_figures/<name>.svg, and the numbers the pages quote from the same data;
* the files the pages include: the example workspace examples/native_op
  (Bazel's @xlabind_example) as /_examples/native_op, examples/native_op_cmake
  as /_examples/native_op_cmake, examples/python_ops as /_examples/python_ops.

    build_docs.py --out html.zip [--workdir DIR] [--stand-ins]
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import os
import pathlib
import re
import shutil
import sys
import tempfile
import zipfile

HERE = pathlib.Path(__file__).resolve().parent
# The runfiles' main repository (Bazel) or the checkout: the folder with docs/.
REPO = next(p for p in [HERE.parent.parent, *HERE.parents] if (p / "docs" / "index.md").exists())
sys.path.insert(0, str(HERE))

import figures  # noqa: E402
import native_headers  # noqa: E402

# Each module's public names in the order a reader meets them, by section.
API = {
    "xlabind": {
        "Binding a function": [
            "callback",
            "linear",
            "multilinear",
            "nonlinear",
            "BoundFunction",
            "Callback",
        ],
        "Native targets": [
            "ffi_target",
            "register_ffi_targets",
            "FfiTarget",
            "include_dir",
            "cmake_dir",
        ],
        "Derivative rules in JAX": ["traceable", "Traceable"],
        "vmap": ["BatchedResult", "VMAP_METHODS"],
        "Sharding": ["ShardingRule", "check_sharding"],
        "Types and constants": [
            "Function",
            "ResultSpec",
            "Rule",
            "EFFECTS",
            "SUPPORTED_DTYPES",
            "UntestedVersionWarning",
        ],
    },
    "xlabind.ops": {"Interpolation": ["map_coordinates", "spline_filter"]},
    "xlabind.cuda": {
        "Inside a CUDA callback": [
            "DeviceArray",
            "current_stream",
            "current_device",
            "is_capturing",
        ]
    },
    "xlabind.jaxbind": {
        "jaxbind's functions": ["get_linear_call", "get_nonlinear_call", "load_kwargs"]
    },
}
PAGES = {
    "xlabind": "xlabind",
    "xlabind.ops": "ops",
    "xlabind.cuda": "cuda",
    "xlabind.jaxbind": "jaxbind",
}
# Names documented as type aliases (their values are typing constructs).
TYPE_ALIASES = {"Function", "ResultSpec", "Rule"}
# Macros other workspaces call, by file.
BAZEL_MACROS = {
    "ffi/defs.bzl": ["xlabind_ffi_library", "xlabind_handler", "xlabind_extension"],
    "repositories.bzl": ["xlabind_dependencies", "xlabind_register_zig_toolchain"],
}


def first_line(text: str) -> str:
    """The first sentence of a docstring or comment."""
    paragraph = " ".join((text or "").strip().split("\n\n")[0].split())
    return re.split(r"(?<=\.)\s+(?=[A-Z`(])", paragraph, maxsplit=1)[0]


def data_comment(name: str) -> str:
    """The ``#:`` comment above `name`'s assignment in an xlabind module
    (autodoc's convention for constants)."""
    for module in list(sys.modules.values()):
        if not getattr(module, "__name__", "").startswith("xlabind"):
            continue
        try:
            lines = inspect.getsource(module).splitlines()
        except (OSError, TypeError):
            continue
        for k, line in enumerate(lines):
            if re.match(rf"{name}\s*(:[^=]*)?=", line):
                comment, j = [], k - 1
                while j >= 0 and lines[j].startswith("#:"):
                    comment.insert(0, lines[j][2:].removeprefix(" ").rstrip())
                    j -= 1
                if comment:
                    return "\n".join(comment)
    raise SystemExit(f"build_docs: {name} has no #: comment to document it with")


def indent(text: str, by: str = "   ") -> list[str]:
    return [by + line if line else "" for line in text.splitlines()]


def short_repr(obj) -> str:
    text = repr(obj)
    if isinstance(obj, (set, frozenset)):
        # Sorted: a set's order follows its members' hashes, which for some
        # (ml_dtypes' dtypes) change from process to process.
        text = f"{type(obj).__name__}({{{', '.join(sorted(map(repr, obj)))}}})"
    return text if len(text) < 200 else text[:197] + "..."


def describe(module_name: str, name: str) -> tuple[list[str], str]:
    """(the reST of one public name's entry, its one-line summary)."""
    module = importlib.import_module(module_name)
    obj = getattr(module, name)
    full = f"{module_name}.{name}"
    # Entries written by hand take the name within the module (the page sets
    # the module); autodoc's take the full one.
    if name in TYPE_ALIASES:
        text = data_comment(name)
        return [f".. py:type:: {name}", "", *indent(text), ""], first_line(text)
    if inspect.isclass(obj) and obj.__name__ != name:  # another name for a class
        text = data_comment(name)
        return (
            [
                f".. py:data:: {name}",
                "",
                *indent(text),
                "",
                f"   The same class as :class:`~{obj.__module__.split('._')[0]}.{obj.__name__}`.",
                "",
            ],
            first_line(text),
        )
    if inspect.isclass(obj) and not obj.__module__.startswith("xlabind"):
        # A compiled (nanobind) class: its docstring and its documented members.
        doc = inspect.getdoc(obj) or ""
        out = [f".. py:class:: {name}", "", *indent(doc), ""]
        for member, value in vars(obj).items():
            member_doc = getattr(value, "__doc__", None) or ""
            if member.startswith("_") and member not in (
                "__cuda_array_interface__",
                "__dlpack__",
                "__dlpack_device__",
            ):
                continue
            if isinstance(value, property):
                out += [f"   .. py:attribute:: {member}", "", *indent(member_doc, "      "), ""]
            elif callable(value):
                signature, _, text = member_doc.partition("\n")
                out += [
                    f"   .. py:method:: {signature.strip()}",
                    "",
                    *indent(text.strip(), "      "),
                    "",
                ]
        return out, first_line(doc)
    if inspect.isclass(obj):
        return [f".. autoclass:: {full}", "   :members:", ""], first_line(inspect.getdoc(obj))
    if callable(obj):
        return [f".. autofunction:: {full}", ""], first_line(inspect.getdoc(obj))
    text = data_comment(name)
    return (
        [
            f".. py:data:: {name}",
            "",
            *indent(text),
            "",
            *indent(f"Value: ``{short_repr(obj)}``"),
            "",
        ],
        first_line(text),
    )


def module_summary(module) -> list[str]:
    """A module docstring's prose: its paragraphs up to the first example or
    indented list, without a first line that only names the module."""
    paragraphs = (inspect.getdoc(module) or "").split("\n\n")
    if re.match(r"^`?[\w.]+`?: ", paragraphs[0]) and "\n" not in paragraphs[0]:
        paragraphs = paragraphs[1:]
    prose = []
    for paragraph in paragraphs:
        if paragraph.startswith((" ", "Example")):
            break
        prose += [*paragraph.splitlines(), ""]
    return prose


def api_page(module_name: str, sections: dict[str, list[str]]) -> str:
    module = importlib.import_module(module_name)
    listed = [name for names in sections.values() for name in names]
    if sorted(listed) != sorted(module.__all__):
        raise SystemExit(
            f"build_docs: API lists {sorted(set(listed) ^ set(module.__all__))} "
            f"unlike {module_name}.__all__: update API in build_docs.py"
        )
    rst = [
        f".. py:module:: {module_name}",
        "",
        *module_summary(module),
        "",
        ".. list-table::",
        "   :widths: 30 70",
        "",
    ]
    entries = []
    for section, names in sections.items():
        entries += [section, "-" * len(section), ""]
        for name in names:
            entry, line = describe(module_name, name)
            entries += entry
            rst += [f"   * - :py:obj:`~{module_name}.{name}`", f"     - {line or ' '}"]
    body = "\n".join(rst + [""] + entries)
    # Not just the module's name: the landing page is "xlabind" already.
    return f"# `{module_name}` API reference\n\n```{{eval-rst}}\n{body}\n```\n"


def native_page() -> str:
    out = [
        "# Native helpers",
        "",
        "The helper headers for handler authors, `ffi/native/include/xlabind/native/*.h`: "
        "header-only, in "
        '`namespace xlabind::native`, included as `#include "xlabind/native/<header>"` '
        "from `@xlabind//ffi/native:helpers` (the macros add it). Generated from the "
        "headers; the [native reference](../native/reference.md) lists them by task.",
        "",
    ]
    for header in native_headers.headers(REPO / native_headers.FOLDER):
        out += [
            f"## `{header.name}`",
            "",
            f"```{{native:header}} {header.name}",
            "```",
            "",
            "```text",
            header.comment,
            "```",
            "",
        ]
        for helper in header.helpers:
            out += [
                f"```{{native:helper}} {helper.name}",
                "```",
                "",
                "```cpp",
                helper.shown,  # wrapped to the docs' width
                "```",
                "",
            ]
            out += helper_entry(helper.doc)
    return "\n".join(out)


def prose(text: str) -> str:
    """A doc comment's text as Markdown: `code` stays code; elsewhere the
    characters Markdown would read as markup (ffi::ErrorOr<T>, a[i], x*y)
    are escaped."""
    pieces = re.split(r"(`[^`]*`)", " ".join(text.split()))
    return "".join(
        piece if piece.startswith("`") else re.sub(r"([<>*\[\]_\\])", r"\\\1", piece)
        for piece in pieces
    )


def helper_entry(doc: native_headers.Doc) -> list[str]:
    """A helper's description, parameters, result and example (its doc
    comment's sections: docs/sphinx/native_headers.py)."""
    out = [prose(paragraph) + "\n" for paragraph in doc.summary.split("\n\n")]
    if doc.args:
        out += ["**Parameters**", ""]
        out += [f"- `{name}`: {prose(text)}" for name, text in doc.args.items()]
        out += [""]
    if doc.returns:
        out += [f"**Returns** {prose(doc.returns)}", ""]
    if doc.example:
        out += ["**Example**", "", "```cpp", doc.example, "```", ""]
    return out


def bazel_macros() -> list[tuple[str, str, str]]:
    """(file, signature, docstring) of each public macro (Starlark parses as Python)."""
    found = []
    for file, names in BAZEL_MACROS.items():
        tree = ast.parse((REPO / file).read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name in names:
                found.append(
                    (file, f"{node.name}({ast.unparse(node.args)})", ast.get_docstring(node) or "")
                )
        missing = set(names) - {sig.split("(")[0] for f, sig, _ in found if f == file}
        if missing:
            raise SystemExit(f"build_docs: {file} defines no {sorted(missing)}")
    return found


def macros_page() -> str:
    from sphinx.ext.napoleon import Config, GoogleDocstring

    config = Config(napoleon_use_param=True, napoleon_use_rtype=False)
    rst = []
    for file, signature, doc in bazel_macros():
        name = signature.split("(")[0]
        text = str(GoogleDocstring(doc, config))
        # Starlark's docstrings quote code in single backticks (Markdown's way).
        text = re.sub(r"(?<![`:])`([^`\n]+)`(?!`)", r"``\1``", text)
        bzl_label = file.replace("/", ":", 1) if "/" in file else ":" + file
        rst += [
            name,
            "-" * len(name),
            "",
            f".. bzl:macro:: {signature}",
            "",
            f"   Load it from ``@xlabind//{bzl_label}``.",
            "",
            *indent(text),
            "",
        ]
    return (
        "# Bazel macros\n\nWhat another Bazel workspace calls: "
        "[Using xlabind from Bazel](../native/bazel.md) shows them together.\n\n"
        "```{eval-rst}\n" + "\n".join(rst) + "\n```\n"
    )


def example_folder() -> pathlib.Path:
    """examples/native_op: @xlabind_example in the runfiles, or the checkout's."""
    # In the runfiles the repository's folder is its canonical name: the name
    # itself under WORKSPACE, ending in ~name (Bazel 7) or +name under bzlmod.
    candidates = [
        folder
        for folder in sorted(REPO.parent.iterdir())
        if folder.name == "xlabind_example"
        or folder.name.endswith(("~xlabind_example", "+xlabind_example"))
    ]
    for candidate in candidates + [
        REPO / "external" / "xlabind_example",
        REPO / "examples" / "native_op",
    ]:
        if (candidate / "WORKSPACE").exists():
            return candidate
    raise SystemExit("build_docs: no examples/native_op (@xlabind_example) to include")


def copy_examples(source: pathlib.Path) -> None:
    target = source / "_examples"
    shutil.copytree(
        example_folder(),
        target / "native_op",
        symlinks=False,
        ignore=shutil.ignore_patterns("bazel-*"),
    )
    shutil.copytree(
        REPO / "examples" / "native_op_cmake",
        target / "native_op_cmake",
        ignore=shutil.ignore_patterns("BUILD.bazel"),
    )
    (target / "python_ops").mkdir()
    for path in (REPO / "examples" / "python_ops").glob("*.py"):
        shutil.copy(path, target / "python_ops" / path.name)


def write_sources(source: pathlib.Path) -> None:
    # docs/ less what is no page: its Bazel file, the figures' data and this
    # builder's own folder (docs/sphinx).
    shutil.copytree(
        REPO / "docs",
        source,
        ignore=shutil.ignore_patterns("BUILD.bazel", "figure_data", "sphinx"),
    )
    figures.write(source / "_figures", figures.load(REPO / "docs" / "figure_data"))
    for module_name, sections in API.items():
        (source / "api" / f"{PAGES[module_name]}.md").write_text(api_page(module_name, sections))
    (source / "api" / "native-helpers.md").write_text(native_page())
    (source / "api" / "bazel-macros.md").write_text(macros_page())
    copy_examples(source)
    shutil.copy(HERE / "conf.py", source / "conf.py")
    shutil.copytree(HERE / "static", source / "static")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the zip of the HTML site to write")
    parser.add_argument(
        "--workdir", help="where to build, kept afterwards (default: a temporary folder, removed)"
    )
    parser.add_argument(
        "--stand-ins",
        action="store_true",
        help="the compiled modules stood in for by a snapshot of what the site "
        "reads of them (stand_ins.py): no C++ or CUDA compiled",
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if args.stand_ins:
        import stand_ins

        stand_ins.install()
    if args.workdir is None:  # a folder of its own, removed once the site is zipped
        with tempfile.TemporaryDirectory(prefix="xlabind-docs-") as work:
            return _build(args, pathlib.Path(work))
    return _build(args, pathlib.Path(args.workdir))


def _build(args, work: pathlib.Path) -> int:
    source, html = work / "source", work / "html"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    write_sources(source)
    from sphinx.cmd.build import build_main

    status = build_main(
        [
            "-W",
            "--keep-going",
            "-n",
            "-q",
            "-b",
            "html",
            "-d",
            str(work / "doctrees"),
            str(source),
            str(html),
        ]
    )
    if status:
        return status
    with zipfile.ZipFile(args.out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(html.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(html).as_posix())
    return 0


if __name__ == "__main__":
    sys.exit(main())
