"""The style gates: every Python file passes ruff's lint and is as ruff
formats it; the package passes mypy; every C++ and CUDA file is as
clang-format writes it; every Starlark file is as buildifier writes it and
passes its lint. The configuration is the checkout's (pyproject.toml,
.clang-format, .buildifier.json); the tools are the pinned ones
(third_party/lint/requirements.lock; mypy from
third_party/python/requirements.lock; buildifier from repositories.bzl), the
versions .pre-commit-config.yaml runs too.

They read the checkout itself (found through the runfiles' link to
README.md), every file Bazel does not generate; BUILD.bazel tags them
"external" so that they run every time. Each failure names the files and
the command that fixes them."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import runfiles_repos

CHECKOUT = pathlib.Path("README.md").resolve().parent
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


def checkout_files() -> list[str]:
    """The checkout's files, relative, without Bazel's outputs and git's folder."""
    found = []
    for folder, folders, files in os.walk(CHECKOUT):
        folders[:] = [f for f in folders if not f.startswith(("bazel-", ".git", "."))]
        found += [os.path.relpath(os.path.join(folder, name), CHECKOUT) for name in files]
    return sorted(found)


def buildifier(root: pathlib.Path) -> list:
    """buildifier as the gate runs it: `root`'s configuration, check only."""
    return [BUILDIFIER, f"-config={root / '.buildifier.json'}", "-mode=check", "-lint=warn"]


def run(command: list, what: str, fix: str) -> None:
    """Runs `command` in the checkout; fails the test with its output and the
    command that fixes the finding."""
    done = subprocess.run(
        [str(c) for c in command], cwd=CHECKOUT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, (
        f"{what} (fix: {fix}):\n{done.stdout[-8000:]}\n{done.stderr[-4000:]}"
    )


def test_python_passes_ruff_lint():
    run(
        [RUFF, "check", "--no-cache", "--output-format=concise", "."],
        "ruff check found problems",
        "ruff check --fix . where it can, else by hand",
    )


def test_python_is_ruff_formatted():
    run(
        [RUFF, "format", "--no-cache", "--check", "--diff", "."],
        "files ruff format would change",
        "ruff format .",
    )


def test_the_package_type_checks(tmp_path):
    run(
        [sys.executable, "-m", "mypy", "--cache-dir", tmp_path, "--no-error-summary"],
        "mypy (configured in pyproject.toml) found errors in python/xlabind",
        "annotate, or correct the code",
    )


def test_cpp_and_cuda_are_clang_formatted():
    sources = [f for f in checkout_files() if f.endswith(C_SUFFIXES)]
    assert len(sources) > 50, sources  # the folders moved, not the files
    run(
        [CLANG_FORMAT, "--dry-run", "--Werror"] + sources,
        "files clang-format would change",
        "clang-format -i FILES",
    )


def test_starlark_is_buildifier_formatted_and_lint_clean():
    files = [
        f
        for f in checkout_files()
        if (os.path.basename(f) in STARLARK_NAMES or f.endswith(STARLARK_SUFFIXES))
        and f not in NOT_FORMATTED
    ]
    assert "WORKSPACE" in files and "repositories.bzl" in files, files
    run(
        buildifier(CHECKOUT) + files,
        "buildifier: files to reformat, or lint warnings",
        "buildifier -lint=fix -mode=fix FILES",
    )


def _lock_pins(path: str) -> dict[str, str]:
    return dict(re.findall(r"^([\w.-]+)==([\w.]+)", (CHECKOUT / path).read_text(), re.M))


def test_pre_commit_runs_the_pinned_versions():
    """.pre-commit-config.yaml's hooks install exactly the locks' versions, and
    buildifier's is the one repositories.bzl downloads."""
    config = (CHECKOUT / ".pre-commit-config.yaml").read_text()
    hooked = re.findall(r"- ([\w.-]+)==([\w.]+)", config)
    pins = _lock_pins("third_party/python/requirements.lock")
    pins.update(_lock_pins("third_party/lint/requirements.lock"))
    assert {"ruff", "clang-format", "mypy", "jax"} <= {name for name, _ in hooked}, hooked
    for name, version in hooked:
        assert pins.get(name) == version, (name, version, pins.get(name))
    downloaded = re.search(
        r"@bazel/buildifier/-/buildifier-([\d.]+)\.tgz", (CHECKOUT / "repositories.bzl").read_text()
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
def test_each_gate_fails_on_a_bad_line(tmp_path, gate, path, bad):
    """Each gate, run on a copy of the checkout's configuration and one file
    with a bad line appended, fails: the gates can fail."""
    copy = tmp_path / "checkout"
    for config in ("pyproject.toml", ".clang-format", ".buildifier.json"):
        (copy / config).parent.mkdir(parents=True, exist_ok=True)
        (copy / config).write_text((CHECKOUT / config).read_text())
    if gate == "mypy":  # the whole package, as mypy's configuration names it
        shutil.copytree(CHECKOUT / "python", copy / "python", ignore=shutil.ignore_patterns("*.so"))
    target = copy / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text((CHECKOUT / path).read_text() + bad)
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
