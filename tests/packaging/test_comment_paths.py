"""Every repository path a comment, a docstring or a documentation page names
exists, and so does every one that a Python string is (a list of files a tool
runs): a path left behind by a move misleads whoever follows it, or breaks
the tool. Paths that are examples, Bazel's outputs or live in another
repository are listed below with why.

It reads every file of the checkout as Bazel inputs (tests/support/checkout.py,
tools/checkout.bzl): Bazel runs it again when a file changes and caches it
otherwise."""

import ast
import io
import pathlib
import re
import tokenize

import checkout

# {path in the checkout: the file}, every file of the checkout.
FILES = checkout.files()
TOPS = ("ffi/", "python/", "tests/", "tools/", "docs/", "third_party/", "examples/", ".ci/")
PATH = re.compile(r"(?<![\w./@-])((?:" + "|".join(re.escape(t) for t in TOPS) + r")[\w./*-]*[\w*])")
# Where the comments and docstrings are, by file kind; a page is all prose.
C_COMMENTS = r"//.*|/\*[\s\S]*?\*/"
SCRIPT_COMMENTS = r"#.*"
PYTHON_COMMENTS = r"#.*|\"\"\"[\s\S]*?\"\"\""
COMMENTS = {
    ".py": PYTHON_COMMENTS,
    ".bzl": PYTHON_COMMENTS,
    ".bazel": SCRIPT_COMMENTS,
    ".cc": C_COMMENTS,
    ".h": C_COMMENTS,
    ".cu": C_COMMENTS,
    ".c": C_COMMENTS,
    ".sh": SCRIPT_COMMENTS,
    ".cmake": SCRIPT_COMMENTS,
    ".toml": SCRIPT_COMMENTS,
    ".txt": SCRIPT_COMMENTS,
    ".md": r"[\s\S]+",
}
SCRIPTS = {"BUILD", "WORKSPACE", "run", "bazel", "bazel7"}  # no suffix: '#' comments
# {(file, path): why it need not exist here}
NOT_HERE = {
    ("docs/development/commands.md", ".ci/disk_cache.bazelrc"): "written by .ci/run",
    ("tests/support/checkout.py", ".ci/disk_cache.bazelrc"): "written by .ci/run",
    ("docs/native/cmake.md", "examples/ffi"): "jax's repository",
    ("third_party/shims/rules_python/BUILD", "python/defs.bzl"): "inside rules_python",
    ("docs/development/commands.md", "examples/native_op/bazel-bin/example_ops.so"): (
        "the example workspace's own Bazel output"
    ),
    ("third_party/bzlmod/registry.py", "tools/features"): "under /usr/share/bazel",
    ("third_party/bzlmod/registry.py", "tools/platforms"): "under /usr/share/bazel",
    ("third_party/bzlmod/registry.py", "tools/skylib"): "under /usr/share/bazel",
}
# {path: the target that builds it}: Bazel's outputs, which tests find in their
# runfiles at these paths.
BUILT = {
    "ffi/ops/_xlabind_cuda_ops_module.cc": "//ffi/ops (xlabind_extension)",
    "ffi/ops/_xlabind_ops_module.cc": "//ffi/ops (xlabind_extension)",
    "tests/native/native_api_ops_module.cc": "//tests/native (xlabind_extension)",
    "tests/runtime/libcuda.so.1": "//tests/runtime",
    "docs/sphinx/html.zip": "//docs/sphinx:html",
    "docs/sphinx/html_quick.zip": "//docs/sphinx:html_quick",
    "tools/machine_probe": "//tools:machine_probe",
}


def all_paths(files) -> set[str]:
    """`files`' paths and their folders'."""
    return set(files) | {str(p) for f in files for p in pathlib.PurePosixPath(f).parents}


def string_paths(text: str):
    """(line, path) of each Python string (docstrings apart) that is a
    repository path as a whole."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return
    for token in tokens:
        if token.type != tokenize.STRING or token.string.endswith(('"""', "'''")):
            continue  # triple-quoted: read as docstrings
        try:
            value = ast.literal_eval(token.string)
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, str) and PATH.fullmatch(value) and "*" not in value:
            yield token.start[0], value


def named_paths(relative: str, text: str):
    """(line, path) of each repository path named in `text`'s comments, and
    in a Python file's strings that are a path as a whole."""
    suffix = pathlib.PurePath(relative).suffix
    name = pathlib.PurePath(relative).name
    pattern = COMMENTS.get(".bazel" if name == "BUILD.bazel" else suffix)
    if pattern is None and name in SCRIPTS:
        pattern = SCRIPT_COMMENTS
    if pattern is None or relative.endswith(".lock") or relative == "docs/changelog.md":
        return  # the changelog names paths as they were
    for comment in re.finditer(pattern, text):
        for match in PATH.finditer(comment.group(0)):
            if "*" in match.group(1):  # a pattern, not a path
                continue
            line = text.count("\n", 0, comment.start() + match.start()) + 1
            yield line, match.group(1).rstrip(".")
    if suffix == ".py":
        yield from string_paths(text)


def missing_paths(files: dict[str, pathlib.Path]) -> list[str]:
    """'file:line: path' for each path named in `files` that is not among them."""
    paths = all_paths(files)
    missing = []
    for relative, path in sorted(files.items()):
        if relative == "tests/packaging/test_comment_paths.py":  # names missing paths on purpose
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for line, named in named_paths(relative, text):
            if named not in paths and named not in BUILT and (relative, named) not in NOT_HERE:
                missing.append(f"{relative}:{line}: {named}")
    return missing


def test_every_file_of_the_checkout_is_an_input():
    """The paths are checked against the declared files: a file Bazel does
    not see (a package or folder left out) would look missing, or escape."""
    missing = checkout.undeclared()
    assert missing == [], checkout.undeclared_message(missing)


def test_every_path_named_in_a_comment_exists():
    assert "ffi/native/errors.h" in FILES and "ffi/native" in all_paths(FILES), sorted(FILES)[:20]
    assert missing_paths(FILES) == []


def test_a_removed_path_is_found():
    text = "x = 1  # see tests/api/test_gone.py and ffi/native/errors.h\n"
    assert list(named_paths("python/xlabind/a.py", text)) == [
        (1, "tests/api/test_gone.py"),
        (1, "ffi/native/errors.h"),
    ]
    assert "tests/api/test_gone.py" not in FILES
    assert list(named_paths("ffi/a.cc", "int x;  // tools/gone.py\n")) == [(1, "tools/gone.py")]
    assert list(named_paths("ffi/a.cc", 'f("tools/not_a_comment.py");\n')) == []


def test_a_python_string_that_names_a_removed_path_is_found(tmp_path):
    """A tool's list of files (tools/check_wheel.py's test files) names a path
    in a string, not a comment: a path there that does not exist is found,
    with its line; one that exists, or that is part of a longer string, is not."""
    text = (
        'TESTS = (\n    "tests/docs/test_readme.py",\n    "docs/test_readme.py",\n)\n'
        'x = f"{root}/docs/gone.py"\nprint("see docs/gone.py")\n'
    )
    (tmp_path / "tool.py").write_text(text)
    files = {"tools/tool.py": tmp_path / "tool.py", "tests/docs/test_readme.py": tmp_path / "a"}
    (tmp_path / "a").write_text("")
    assert missing_paths(files) == ["tools/tool.py:3: docs/test_readme.py"]
