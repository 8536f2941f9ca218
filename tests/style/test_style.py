"""The style gates: every Python file passes ruff's lint and is as ruff
formats it; the package passes mypy; every C++ and CUDA file is as
clang-format writes it; every Starlark file is as buildifier writes it and
passes its lint. The configuration is the checkout's (pyproject.toml,
.clang-format, .buildifier.json); the tools are the pinned ones
(third_party/lint/requirements.lock; mypy from
third_party/python/requirements.lock; buildifier from repositories.bzl), the
versions .pre-commit-config.yaml runs too.

They read every file of the checkout as Bazel inputs (tests/support/checkout.py,
tools/checkout.bzl), copied into a folder laid out as the checkout is: Bazel
runs them again when a file changes and caches them otherwise. One test fails
when the checkout holds a file that is not among those inputs. Each failure
names the files and the command that fixes them."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import checkout
import pytest
import runfiles_repos

# {path in the checkout: the file}, every file of the checkout.
FILES = checkout.files()
LINT_SITE = runfiles_repos.repository("xlabind_lint_pypi") / "site"
BUILDIFIER = runfiles_repos.repository("xlabind_buildifier") / "buildifier-linux_amd64"
RUFF = LINT_SITE / "bin" / "ruff"
CLANG_FORMAT = LINT_SITE / "clang_format" / "data" / "bin" / "clang-format"
C_SUFFIXES = (".cc", ".h", ".cu")
STARLARK_NAMES = ("BUILD", "BUILD.bazel", "WORKSPACE", "MODULE.bazel")
STARLARK_SUFFIXES = (".bzl", ".BUILD")
# {path: why buildifier does not format it}
NOT_FORMATTED = {
    # Each section is quoted in docs/native/bazel.md with its own load();
    # buildifier would merge the loads into one at the top.
    "examples/native_op/WORKSPACE",
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> pathlib.Path:
    """A copy of the checkout's files, where the gates run."""
    return checkout.copy(tmp_path_factory.mktemp("checkout"))


def checkout_files() -> list[str]:
    """The checkout's files, relative, but those in dot-folders (.ci)."""
    return sorted(f for f in FILES if not any(p.startswith(".") for p in f.split("/")[:-1]))


def buildifier(root: pathlib.Path) -> list:
    """buildifier as the gate runs it: `root`'s configuration, check only."""
    return [BUILDIFIER, f"-config={root / '.buildifier.json'}", "-mode=check", "-lint=warn"]


def run(command: list, where: pathlib.Path, what: str, fix: str) -> None:
    """Runs `command` in `where` (the copy of the checkout); fails the test
    with its output and the command that fixes the finding."""
    done = subprocess.run(
        [str(c) for c in command], cwd=where, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, (
        f"{what} (fix: {fix}):\n{done.stdout[-8000:]}\n{done.stderr[-4000:]}"
    )


def test_every_file_of_the_checkout_is_an_input():
    """What the gates check is what Bazel declared; a file it does not see
    (a package or folder left out) would escape them."""
    missing = checkout.undeclared()
    assert missing == [], checkout.undeclared_message(missing)


def test_a_file_outside_the_inputs_is_found(tmp_path):
    """undeclared() finds a file in a folder Bazel does not see, and leaves out
    Bazel's output links and the caches."""
    for path in [*FILES, "new_folder/new.py", "bazel-out/x.py", "new_folder/__pycache__/x.pyc"]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).touch()
    assert checkout.undeclared(tmp_path) == ["new_folder/new.py"]


def test_python_passes_ruff_lint(tree):
    run(
        [RUFF, "check", "--no-cache", "--output-format=concise", "."],
        tree,
        "ruff check found problems",
        "ruff check --fix . where it can, else by hand",
    )


def test_python_is_ruff_formatted(tree):
    run(
        [RUFF, "format", "--no-cache", "--check", "--diff", "."],
        tree,
        "files ruff format would change",
        "ruff format .",
    )


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory) -> pathlib.Path:
    """mypy's cache of the whole check, which the bad-line gate starts from
    (mypy then checks again only what changed: 1 s instead of 7)."""
    return tmp_path_factory.mktemp("mypy_cache")


def test_the_package_type_checks(tree, mypy_cache):
    run(
        [sys.executable, "-m", "mypy", "--cache-dir", mypy_cache, "--no-error-summary"],
        tree,
        "mypy (configured in pyproject.toml) found errors in python/xlabind",
        "annotate, or correct the code",
    )


def test_cpp_and_cuda_are_clang_formatted(tree):
    sources = [f for f in checkout_files() if f.endswith(C_SUFFIXES)]
    assert len(sources) > 50, sources  # the folders moved, not the files
    run(
        [CLANG_FORMAT, "--dry-run", "--Werror"] + sources,
        tree,
        "files clang-format would change",
        "clang-format -i FILES",
    )


def test_starlark_is_buildifier_formatted_and_lint_clean(tree):
    files = [
        f
        for f in checkout_files()
        if (os.path.basename(f) in STARLARK_NAMES or f.endswith(STARLARK_SUFFIXES))
        and f not in NOT_FORMATTED
    ]
    assert "WORKSPACE" in files and "repositories.bzl" in files, files
    run(
        buildifier(tree) + files,
        tree,
        "buildifier: files to reformat, or lint warnings",
        "buildifier -lint=fix -mode=fix FILES",
    )


def _lock_pins(path: str) -> dict[str, str]:
    return dict(re.findall(r"^([\w.-]+)==([\w.]+)", FILES[path].read_text(), re.M))


def test_pre_commit_runs_the_pinned_versions():
    """.pre-commit-config.yaml's hooks install exactly the locks' versions, and
    buildifier's is the one repositories.bzl downloads."""
    config = FILES[".pre-commit-config.yaml"].read_text()
    hooked = re.findall(r"- ([\w.-]+)==([\w.]+)", config)
    pins = _lock_pins("third_party/python/requirements.lock")
    pins.update(_lock_pins("third_party/lint/requirements.lock"))
    assert {"ruff", "clang-format", "mypy", "jax"} <= {name for name, _ in hooked}, hooked
    for name, version in hooked:
        assert pins.get(name) == version, (name, version, pins.get(name))
    downloaded = re.search(
        r"@bazel/buildifier/-/buildifier-([\d.]+)\.tgz", FILES["repositories.bzl"].read_text()
    )
    assert f"@bazel/buildifier@{downloaded.group(1)}" in config


@pytest.mark.parametrize(
    "gate, path, bad",
    [
        ("ruff", "python/xlabind/_platforms.py", "import os\n"),
        ("mypy", "python/xlabind/callback.py", "def untyped(x):\n    return x\n"),
        ("clang-format", "ffi/module.cc", "int  badly_spaced ;\n"),
        ("buildifier", "tests/style/BUILD.bazel", 'filegroup(name="x",srcs=[])\n'),
    ],
)
def test_each_gate_fails_on_a_bad_line(tree, mypy_cache, tmp_path, gate, path, bad):
    """Each gate, run on a copy of the checkout's configuration and one input
    file with a bad line appended, fails: the gates can fail."""
    copy = tmp_path / "checkout"
    for config in ("pyproject.toml", ".clang-format", ".buildifier.json"):
        (copy / config).parent.mkdir(parents=True, exist_ok=True)
        (copy / config).write_text((tree / config).read_text())
    if gate == "mypy":  # the whole package, as mypy's configuration names it
        shutil.copytree(tree / "python", copy / "python")
        shutil.copytree(mypy_cache, tmp_path / "cache")
    target = copy / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(FILES[path].read_text() + bad)
    commands = {
        "ruff": [RUFF, "check", "--no-cache", path],
        "mypy": [sys.executable, "-m", "mypy", "--cache-dir", tmp_path / "cache"],
        "clang-format": [
            CLANG_FORMAT,
            "--dry-run",
            "--Werror",
            path,
        ],
        "buildifier": [*buildifier(copy), path],
    }
    done = subprocess.run(
        [str(c) for c in commands[gate]], cwd=copy, capture_output=True, text=True, timeout=600
    )
    assert done.returncode != 0, (gate, done.stdout, done.stderr)
    assert path.split("/")[-1] in done.stdout + done.stderr, (gate, done.stdout, done.stderr)
