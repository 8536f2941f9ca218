"""The README is a short entrance: at most 150 lines, its example runs as
written, its commands are the ones the project runs, and every link in it
leads to a file of the repository."""

import pathlib
import re

import runfiles_repos

README = pathlib.Path("README.md")  # in the runfiles
# The example workspace: @xlabind_example in the runfiles.
EXAMPLE = runfiles_repos.repository("xlabind_example") or pathlib.Path("examples/native_op")


def exists(link: str) -> bool:
    if link.startswith("examples/native_op"):
        return (EXAMPLE / link.removeprefix("examples/native_op").lstrip("/")).exists()
    return pathlib.Path(link).exists()


def test_readme_fits_on_two_screens():
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, len(lines)


def test_readme_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) == 1
    assert len(blocks[0].strip().splitlines()) <= 15
    namespace = {}
    exec(compile(blocks[0], str(README), "exec"), namespace)  # it asserts what it shows
    assert "softplus" in namespace


def test_readme_links_lead_to_files():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    assert len(links) > 20
    missing = [link for link in links if "://" not in link and not exists(link)]
    assert not missing, missing


def test_readme_gives_the_two_commands_and_the_install():
    text = README.read_text()
    for command in (
        "tools/bazel test //...",
        "tools/bazel run //examples/python_ops:demo",
        "tools/bazel run //docs/sphinx:open",
        "python -m xlabind",
        "[cuda13]",
    ):
        assert command in text, command
