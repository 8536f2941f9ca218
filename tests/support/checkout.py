"""The checkout's files as a test declares them (//tests/support:checkout,
tools/checkout.bzl): each file's path in the checkout and the file in the
runfiles, a copy of them laid out as in the checkout, and the checkout's
files that are not among them.

The tests that check the sources themselves (tests/style,
tests/packaging/test_comment_paths.py) read these inputs, so Bazel runs them
again when a file changes and caches them otherwise. What would escape them is
a file Bazel does not see: in a package missing from CHECKOUT_PACKAGES, or in a
folder of the root that the root's patterns leave out. undeclared() finds such
files by listing the checkout itself (through README.md's link in the
runfiles); it reads no file there. A new folder at the root changes the
manifest (which names the root's folders), so the tests run again and find
it; a new package stops Bazel 7 (tools/checkout.bzl), and Bazel 4.2.3's
tests find it the next time an input changes."""

import json
import os
import pathlib
import shutil

# tests/support/checkout.py in the main repository's folder of the runfiles.
RUNFILES = pathlib.Path(__file__).parents[2]
MANIFEST = RUNFILES / "tests" / "support" / "checkout_manifest.json"

# What the globs of tools/checkout.bzl leave out (its NOT_SOURCES and the
# root's exclusions, .gitignore's patterns): folders of these names anywhere,
# files with these suffixes, these files, Bazel's output links (bazel-*, here
# and in examples/native_op), and at the top the wheel's folder and the
# folders of local tools (git's, caches, a scratch folder; .ci apart).
NOT_SOURCE_FOLDERS = {"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
NOT_SOURCE_SUFFIXES = (".pyc", ".so")
NOT_SOURCE_FILES = {".ci/disk_cache.bazelrc", "MODULE.bazel.lock", "user.bazelrc"}
TOP_FOLDERS_KEPT = {".ci"}
TOP_NOT_SOURCE_FOLDERS = {"dist"}


def files() -> dict[str, pathlib.Path]:
    """{path in the checkout: the file in the runfiles}, every declared file."""
    declared = json.loads(MANIFEST.read_text())["files"]
    return {path: pathlib.Path(os.path.normpath(RUNFILES / f)) for path, f in declared.items()}


def copy(to: pathlib.Path) -> pathlib.Path:
    """`to`, holding a copy of every declared file at its path in the checkout
    (copies, not links: a tool that follows links would reach the checkout)."""
    for path, runfile in files().items():
        (to / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(runfile, to / path)
    return to


def checkout() -> pathlib.Path:
    """The checkout Bazel runs in, found through README.md's link."""
    return (RUNFILES / "README.md").resolve().parent


def _kept_folder(name: str, top: bool) -> bool:
    if name in NOT_SOURCE_FOLDERS or name.startswith("bazel-"):
        return False
    if top:
        return name not in TOP_NOT_SOURCE_FOLDERS and (
            not name.startswith(".") or name in TOP_FOLDERS_KEPT
        )
    return True


def undeclared(root: pathlib.Path | None = None) -> list[str]:
    """The files of the checkout (or of `root`) that are not declared: their
    paths, sorted. It lists folders and reads no file."""
    root = root or checkout()
    declared = set(files())
    missing = []
    for folder, folders, names in os.walk(root):
        relative = pathlib.Path(folder).relative_to(root)
        top = relative == pathlib.Path(".")
        folders[:] = [name for name in folders if _kept_folder(name, top)]
        for name in names:
            path = (relative / name).as_posix()
            if name.endswith(NOT_SOURCE_SUFFIXES) or path in NOT_SOURCE_FILES:
                continue
            if path not in declared:
                missing.append(path)
    return sorted(missing)


def undeclared_message(missing: list[str]) -> str:
    return (
        "files of the checkout that the tests checking it do not see: declare them "
        "(a package: add it to CHECKOUT_PACKAGES in tools/checkout.bzl and call "
        "checkout_files() in its BUILD.bazel; a folder without a BUILD file at the "
        "top: add it to checkout_files() in BUILD.bazel), or, if they are no "
        "sources, leave them out there and in tests/support/checkout.py:\n" + "\n".join(missing)
    )
