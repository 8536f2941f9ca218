"""The README's Python examples run as written, in order, in one namespace."""

import pathlib
import re
import subprocess
import sys

import numpy as np

HEADERS = pathlib.Path(__file__).parents[2] / "ffi" / "native"


def readme_blocks():
    text = pathlib.Path("README.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_readme_has_examples():
    assert len(readme_blocks()) >= 2


def test_readme_examples_run():
    namespace = {}
    blocks = readme_blocks()
    run = lambda block: exec(compile(block, "README.md", "exec"), namespace)
    # The minimal example's f(x) is sum(2 * gammaln(x + 1)) over 0..4.
    run(blocks[0])
    import scipy.special
    expected = np.sum(2.0 * scipy.special.gammaln(np.arange(5.0) + 1.0))
    np.testing.assert_allclose(float(namespace["f"](namespace["jnp"].arange(5.0))), expected,
                               rtol=1e-6)
    run(blocks[1])
    np.testing.assert_allclose(float(namespace["mean"]), 2.0)
    np.testing.assert_allclose(float(namespace["spread"]), 4.0)
    # The tutorial blocks carry their own assertions.
    for block in blocks[2:]:
        run(block)


def test_readme_shell_commands_run():
    """Blocks tagged `sh test` run as written (python3 being this interpreter)."""
    blocks = re.findall(r"```sh test\n(.*?)```", pathlib.Path("README.md").read_text(), flags=re.S)
    assert blocks
    for block in blocks:
        for command in block.strip().splitlines():
            command = re.sub(r"^python3 ", f"{sys.executable} ", command)
            done = subprocess.run(command, shell=True, capture_output=True, text=True)
            assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
            assert done.stdout.strip(), command


def public_names(header: pathlib.Path) -> set[str]:
    """What a handler author may use from `header`: the declarations at the top
    level of namespace xlabind::native (not in an *internal namespace), and
    XLABIND_* macros other than the include guard and those ending in "_"
    (a public macro's own parts)."""
    names, hidden = set(), False
    for line in header.read_text().splitlines():
        if re.match(r"namespace \w*internal \{", line):
            hidden = True
        elif re.match(r"\}  // namespace \w*internal", line):
            hidden = False
        elif not hidden:
            found = (re.match(r"#define (XLABIND_\w*[A-Z0-9])[( ]", line)
                     or re.match(r"(?:class|struct) (\w+)", line)
                     or re.match(r"inline constexpr [\w: *]+?\b(\w+)(\[\])? =", line)
                     or re.match(r"(?:inline )?\w[\w:<>, *&]*?[ *&](\w+)\(", line))
            if found and not line.startswith(("namespace", "template", "}")):
                names.add(found.group(1))
    return names


def test_the_readme_lists_every_native_helper_and_no_other():
    """README's "Helpers for handlers" table against ffi/native/*.h."""
    text = pathlib.Path("README.md").read_text()
    table = text[text.index("#### Helpers for handlers"):]
    table = table[:table.index("\n\n`tests/test_readme.py`")]
    rows = re.findall(r"^\| `(\w+\.h)` \| (.*?) \|", table, flags=re.M)
    listed = {header: set(re.findall(r"`(\w+)`", names)) for header, names in rows}
    actual = {path.name: public_names(path) for path in sorted(HEADERS.glob("*.h"))}
    assert actual and all(actual.values()), actual
    assert listed == actual
