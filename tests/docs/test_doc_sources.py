"""The documentation's sources as files (docs/**/*.md): code that fits the
column, no code pasted from a file of the repository (the pages include
files), and the native reference's table of helpers against the headers."""

import pathlib
import re

import doc_terms
import native_headers
import runfiles_repos

DOCS = pathlib.Path("docs")  # in the runfiles
PAGES = sorted(DOCS.rglob("*.md"))
# What the pages could have copied from: the package, the native sources, the
# tools, the tests and the example workspace (@xlabind_example in the
# runfiles, examples/native_op in a checkout).
EXAMPLE = runfiles_repos.repository("xlabind_example") or pathlib.Path("examples/native_op")
SOURCES = ["python", "ffi", "tools", "docs/sphinx", "tests", str(EXAMPLE)]
SOURCE_SUFFIXES = {".py", ".cc", ".h", ".cu", ".bzl", ".bazel", ""}
WINDOW = 5  # consecutive non-blank lines that make a copy
FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")


def code_blocks(page: pathlib.Path):
    """(first line number, [lines]) of each fenced block that is code (not a
    directive such as {toctree} or {literalinclude})."""
    lines = page.read_text().splitlines()
    k = 0
    while k < len(lines):
        opening = FENCE.match(lines[k])
        if not opening:
            k += 1
            continue
        fence, info = opening.groups()
        end = next(j for j in range(k + 1, len(lines)) if lines[j].strip() == fence)
        body = [line for line in lines[k + 1 : end] if not re.match(r"^:[\w-]+:", line)]
        directive = re.match(r"\{([\w:-]+)\}", info.strip())
        if directive is None or directive.group(1) == "code-block":
            yield k + 2, body
        k = end + 1


def windows(lines):
    # Imports are not pasted code: sorted (ruff), a page's and a tool's
    # imports of the same modules are the same lines.
    kept = [
        line.strip()
        for line in lines
        if line.strip() and not line.strip().startswith(("import ", "from "))
    ]
    return {tuple(kept[i : i + WINDOW]) for i in range(len(kept) - WINDOW + 1)}


def test_code_blocks_fit_88_columns():
    wide = [
        f"{page}:{start + i}: {len(line)} columns"
        for page in PAGES
        for start, body in code_blocks(page)
        for i, line in enumerate(body)
        if len(line) > 88
    ]
    assert not wide, "\n".join(wide)


def test_no_code_is_pasted_from_a_source_file():
    sources = {}
    for folder in SOURCES:
        for path in pathlib.Path(folder).rglob("*"):
            if path.is_file() and path.suffix in SOURCE_SUFFIXES and "bazel-" not in str(path):
                try:
                    for window in windows(path.read_text().splitlines()):
                        sources.setdefault(window, path)
                except UnicodeDecodeError:
                    continue
    assert len(sources) > 10_000  # the sources are there to compare with
    pasted = [
        f"{page}:{start}: {WINDOW} lines of {sources[w]}"
        for page in PAGES
        for start, body in code_blocks(page)
        for w in windows(body)
        if w in sources
    ]
    assert not pasted, "\n".join(sorted(set(pasted)))


def test_the_native_reference_lists_every_helper_and_no_other():
    """docs/native/reference.md's table of helpers against the headers."""
    text = (DOCS / "native" / "reference.md").read_text()
    rows = re.findall(r"^\| `(\w+\.h)` \| (.*?) \|", text, flags=re.M)
    listed = {header: set(re.findall(r"\{native:helper\}`(\w+)`", names)) for header, names in rows}
    actual = {
        h.name: {helper.name for helper in h.helpers}
        for h in native_headers.headers(pathlib.Path(native_headers.FOLDER))
    }
    assert actual and all(actual.values()), actual
    assert listed == actual


def test_every_native_helper_is_a_reference_entry():
    """Each helper's doc comment, as the native API page renders it: a
    description, every parameter under Args: in the declaration's order,
    Returns: exactly where a function returns something, and an Example: for
    every function and function-like macro."""
    problems = []
    for header in native_headers.headers(pathlib.Path(native_headers.FOLDER)):
        for helper in header.helpers:
            where = f"{header.name}: {helper.name}"
            try:
                doc = helper.doc
            except ValueError as error:
                problems.append(f"{where}: {error}")
                continue
            if not doc.summary:
                problems.append(f"{where}: no description")
            if list(doc.args) != helper.parameters:
                problems.append(f"{where}: Args: {list(doc.args)}, parameters {helper.parameters}")
            if bool(doc.returns) != helper.returns_value:
                problems.append(f"{where}: Returns: {doc.returns!r} for {helper.kind}")
            if helper.kind != "other" and not doc.example:
                problems.append(f"{where}: no Example:")
            if any(len(line) > 88 for line in doc.example.splitlines()):
                problems.append(f"{where}: an Example: line over 88 columns")
    assert not problems, "\n".join(problems)


def test_a_helper_doc_missing_a_parameter_is_found():
    """The check above reads the declaration, not the comment alone."""
    helper = native_headers.Helper(
        "CheckRank",
        "xla::ffi::Error CheckRank(const char* op, const Buffer& buffer, size_t rank = 1) {",
        "An error.\n\nArgs:\n  op: the name.\n  rank: the rank.\nReturns:\n  It.",
    )
    assert helper.parameters == ["op", "buffer", "rank"]
    assert list(helper.doc.args) == ["op", "rank"]
    assert helper.returns_value and helper.kind == "function"


def test_every_public_name_a_page_mentions_is_linked_on_it():
    """A public Python name, Bazel macro or native helper in a page's prose
    (inline code) is a link into the reference there, at least once."""
    import importlib

    names = {
        f"{m}.{n}"
        for m in ("xlabind", "xlabind.ops", "xlabind.cuda", "xlabind.jaxbind")
        for n in importlib.import_module(m).__all__
    }
    names |= {
        helper.name
        for header in native_headers.headers(pathlib.Path(native_headers.FOLDER))
        for helper in header.helpers
    }
    names |= {
        "xlabind_ffi_library",
        "xlabind_extension",
        "xlabind_dependencies",
        "xlabind_register_zig_toolchain",
    }
    unlinked = []
    for page in PAGES:
        prose = re.sub(r"^(`{3,}|~{3,}).*?^\1\s*$", "", page.read_text(), flags=re.S | re.M)
        linked = set()
        for text, target in re.findall(r"\{[\w:]+\}`~?([^`<]+?)(?: <([^>]+)>)?`", prose):
            linked |= {text.strip(), target}
        for code in re.findall(r"(?<![}`])`([^`]+)`(?!`)", prose):
            name = code.split("(")[0].strip()
            if name in names and name not in linked:
                unlinked.append(f"{page}: `{code}`")
    assert not unlinked, "\n".join(sorted(set(unlinked)))


# pip install arguments a reader can run: a wheel file (xlabind is not on
# PyPI), a local folder or file, an option or a placeholder (DIR), or a
# requirement of another project.
INSTALLABLE = re.compile(
    r"""-\S+|[A-Z]+|\.{0,2}/\S*|[\w.-]+/\S*"""
    r"""|"?xlabind-[\w.]+-\w+-\w+-\w+\.whl(\[\w+\])?"?"""
    r"""|["']?(?!xlabind\b)[A-Za-z][\w.-]*(\[[\w,]+\])?([<>=~!][^"'\s]*)?["']?"""
)
PIP_INSTALL = re.compile(r"pip install ([^`#)\n]+?)(?=`|\)|#|$)")


def pip_install_lines():
    """(where, the arguments) of every `pip install` in the pages, the README
    and the messages xlabind prints (with their placeholders filled)."""
    from xlabind import _compatibility
    from xlabind.ops import _native

    texts = {str(path): path.read_text() for path in PAGES + [pathlib.Path("README.md")]}
    texts["the missing-CUDA-runtime error"] = _native.cuda_runtime_missing(OSError("x"))
    texts["the too-old error"] = _compatibility.failing_message({"jax": "0.1", "numpy": "1.0"})
    for where, text in texts.items():
        for number, line in enumerate(text.splitlines(), 1):
            for match in PIP_INSTALL.finditer(line):
                yield f"{where}:{number}", match.group(1).split()


def test_every_pip_install_names_something_that_installs():
    found = list(pip_install_lines())
    assert len(found) >= 10, found
    assert any(where.startswith("the missing-CUDA") for where, _ in found), found
    wrong = [
        (where, arguments)
        for where, arguments in found
        if not all(INSTALLABLE.fullmatch(a.rstrip(".,;")) for a in arguments)
    ]
    assert not wrong, f"pip install lines naming xlabind as if it were on PyPI: {wrong}"


def test_the_pip_install_check_can_fail():
    assert not INSTALLABLE.fullmatch('"xlabind[cuda13]"')
    assert not INSTALLABLE.fullmatch("xlabind")
    assert INSTALLABLE.fullmatch('"xlabind-0.5.0-cp311-cp311-manylinux_2_17_x86_64.whl[cuda13]"')
    assert INSTALLABLE.fullmatch('"jax[cuda13]"')


def glossary_terms() -> list[str]:
    """The terms docs/glossary.md defines: the unindented lines of its
    {glossary} block."""
    text = (DOCS / "glossary.md").read_text()
    block = text.split("```{glossary}", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line and not line[0].isspace()]


def test_the_glossary_defines_the_terms_and_every_page_links_their_first_use():
    assert sorted(glossary_terms()) == sorted(doc_terms.TERMS), glossary_terms()
    unlinked = [
        f"{page}:{use.line}: {term}"
        for page in PAGES
        if page.name != "glossary.md"
        for term, use in doc_terms.first_uses(page).items()
        if not use.linked
    ]
    assert not unlinked, "first uses of glossary terms not linked to it:\n" + "\n".join(unlinked)


def test_an_unlinked_first_use_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# A transpose\n\nThe `transpose` and the transpose of a\n"
        "{term}`cotangent`, then a cotangent.\n\n```python\nmesh = 1\n```\n"
    )
    uses = doc_terms.first_uses(page)
    assert sorted(uses) == ["cotangent", "transpose"], uses
    assert not uses["transpose"].linked and uses["transpose"].line == 3
    assert uses["cotangent"].linked
