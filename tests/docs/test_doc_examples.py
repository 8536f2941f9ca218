"""Every Python block of the documentation runs (tests/support/doc_blocks.py):
each page's blocks in order, in one namespace, as a reader runs them, with 8
CPU devices and, in a process of its own, with one; each block on its own,
after only the blocks the site's note above it names (with 8 devices). In
the sampled loop each page runs one of the three ways
(tests/support/cases.py); the blocks marked for a GPU or several processes
run in tools/device_check.py and tests/sharding/test_multiprocess.py."""

import doc_blocks

doc_blocks.set_up_devices()  # before jax starts: the sharding guide's 8 devices

import os  # noqa: E402
import pathlib  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import cases  # noqa: E402
import jax  # noqa: E402
import pytest  # noqa: E402

DOCS = pathlib.Path("docs")  # in the runfiles
PAGES = sorted(DOCS.rglob("*.md"))
PAGES_HERE = [
    str(page) for page in PAGES if any(b.place == "here" for b in doc_blocks.blocks(page))
]


def test_the_pages_have_blocks_for_every_place():
    places = {block.place for page in PAGES for block in doc_blocks.blocks(page)}
    assert places == set(doc_blocks.PLACES), places
    here = sum(block.place == "here" for page in PAGES for block in doc_blocks.blocks(page))
    assert here >= 50, here


WAYS = ("in-order", "block-by-block", "on one device")
PAGE_RUNS = cases.product("test_page", PAGES_HERE, WAYS)


@pytest.mark.parametrize("page, how", PAGE_RUNS)
def test_page(page, how, request):
    """In order: the page's blocks in one namespace. Block by block: as a
    reader who lands on a block, a fresh namespace, the earlier blocks its
    note names (docs/sphinx/block_needs.py), then the block. On one device:
    in order, as on a reader's laptop, a fresh process with one CPU device,
    where a page that needs several devices sets them up itself."""
    if how == "on one device":
        stdout, stderr = request.getfixturevalue("on_one_device")
        failure = stderr.partition(f"== {page}")[2]
        assert not failure, failure[-4000:]
        ran = [line for line in stdout.splitlines() if line.startswith(f"{page}: ")]
        assert ran and ran[0].endswith("blocks ran"), stdout + stderr[-4000:]
        return
    before = {name: getattr(jax.config, name) for name in ("jax_enable_x64",)}
    try:
        if how == "in-order":
            doc_blocks.run(pathlib.Path(page))
        else:
            assert doc_blocks.run_standalone(pathlib.Path(page)) >= 1
    finally:
        # A page that changes jax's configuration changes it for itself only.
        for name, value in before.items():
            jax.config.update(name, value)


@pytest.fixture(scope="module")
def on_one_device():
    """The pages this run takes on one device (doc_blocks.run_on_one_device:
    a process of its own each, forked from one that imported jax), as
    (stdout, stderr)."""
    pages = [p.values[0] for p in PAGE_RUNS if p.values[1] == "on one device"]
    done = subprocess.run(
        [sys.executable, doc_blocks.__file__, "--one-device", *pages],
        capture_output=True,
        text=True,
        timeout=900,
    )
    return done.stdout, done.stderr


def test_one_device_runs_each_page_afresh_and_reports_each_failure(tmp_path):
    """run_on_one_device's children: one device each, a page's own device
    flags take effect after the parent's imports, and a failing or crashing
    page is named while the others still report."""
    pages = {
        "one.md": "import jax\nassert jax.device_count() == 1, jax.devices()\n",
        "four.md": "import os\nos.environ['XLA_FLAGS'] = os.environ.get('XLA_FLAGS', '') + "
        "' --xla_force_host_platform_device_count=4'\nimport jax\n"
        "assert jax.device_count() == 4, jax.devices()\n",
        "fails.md": "raise ValueError('this page fails')\n",
        "crashes.md": "import os\nos.abort()\n",
        "after.md": "import jax\nassert jax.device_count() == 1\n",
    }
    paths = []
    for name, code in pages.items():
        (tmp_path / name).write_text(f"```python\n{code}```\n")
        paths.append(str(tmp_path / name))
    done = subprocess.run(
        [sys.executable, doc_blocks.__file__, "--one-device", *paths],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8"},
    )
    assert done.returncode == 1
    ran = {line.split(":")[0] for line in done.stdout.splitlines() if line.endswith("blocks ran")}
    assert ran == {str(tmp_path / n) for n in ("one.md", "four.md", "after.md")}, done.stdout
    assert "this page fails" in done.stderr.partition(f"== {tmp_path / 'fails.md'}")[2]
    assert f"== {tmp_path / 'crashes.md'}: exit status" in done.stderr, done.stderr[-2000:]


def test_a_block_missing_what_it_needs_fails(tmp_path):
    page = tmp_path / "page.md"
    first = "```python\nimport numpy as np\nx = np.ones(2)\n```\n\n"
    page.write_text(first + "```python\nassert np.sum(x) == 2\n```\n")
    assert doc_blocks.run_standalone(page) == 2
    # Its own imports broken: the block fails, and so would every block after it.
    page.write_text(first.replace("import numpy as np\n", "") + "```python\nprint(x)\n```\n")
    with pytest.raises(AssertionError, match=r"page.md:2: .*NameError: name 'np'"):
        doc_blocks.run_standalone(page)
