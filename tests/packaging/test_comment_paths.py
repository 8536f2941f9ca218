"""Every repository path a comment, a docstring or a documentation page names
exists: a path left behind by a move misleads whoever follows it. Paths that
are examples, or live in another repository, are listed below with why.

It reads the checkout itself (found through the runfiles' link to
README.md), every file Bazel does not generate; tests/BUILD.bazel tags it
"external" so that it runs every time."""

import os
import pathlib
import re

CHECKOUT = pathlib.Path("README.md").resolve().parent
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
    ("docs/native/cmake.md", "examples/ffi"): "jax's repository",
    ("third_party/shims/rules_python/BUILD", "python/defs.bzl"): "inside rules_python",
    ("tools/gpu_check.py", "ffi/cpu/x.cc"): "an example name",
    ("tools/gpu_check.py", "ffi/cuda/x.cc"): "an example name",
}


def sources() -> list[pathlib.Path]:
    """The checkout's files, without Bazel's outputs and git's folder."""
    found = []
    for folder, folders, files in os.walk(CHECKOUT):
        folders[:] = [f for f in folders if not f.startswith(("bazel-", ".git"))]
        found += [pathlib.Path(folder, name) for name in files]
    return found


def named_paths(relative: str, text: str):
    """(line, path) of each repository path named in `text`'s comments."""
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


def missing_paths() -> list[str]:
    missing = []
    for path in sources():
        relative = path.relative_to(CHECKOUT).as_posix()
        if relative == "tests/packaging/test_comment_paths.py":  # names missing paths on purpose
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for line, named in named_paths(relative, text):
            if not (CHECKOUT / named).exists() and (relative, named) not in NOT_HERE:
                missing.append(f"{relative}:{line}: {named}")
    return missing


def test_every_path_named_in_a_comment_exists():
    assert (CHECKOUT / "ffi" / "native" / "errors.h").is_file(), CHECKOUT
    assert missing_paths() == []


def test_a_removed_path_is_found():
    text = "x = 1  # see tests/api/test_gone.py and ffi/native/errors.h\n"
    assert list(named_paths("python/xlabind/a.py", text)) == [
        (1, "tests/api/test_gone.py"),
        (1, "ffi/native/errors.h"),
    ]
    assert not (CHECKOUT / "tests/api/test_gone.py").exists()
    assert list(named_paths("ffi/a.cc", "int x;  // tools/gone.py\n")) == [(1, "tools/gone.py")]
    assert list(named_paths("ffi/a.cc", 'f("tools/not_a_comment.py");\n')) == []
