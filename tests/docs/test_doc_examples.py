"""Every Python block of the documentation runs (tests/support/doc_blocks.py):
each page's blocks in order, in one namespace, as a reader runs them, with 8
CPU devices and, in a process of its own, with one; each block on its own,
after only the blocks the site's note above it names; the
blocks marked for a GPU or several processes run in tools/gpu_check.py and
tests/sharding/test_multiprocess.py."""

import doc_blocks

doc_blocks.set_up_devices()  # before jax starts: the sharding guide's 8 devices

import os  # noqa: E402
import pathlib  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import jax  # noqa: E402
import pytest  # noqa: E402

DOCS = pathlib.Path("docs")  # in the runfiles
PAGES = sorted(DOCS.rglob("*.md"))


def test_the_pages_have_blocks_for_every_place():
    places = {block.place for page in PAGES for block in doc_blocks.blocks(page)}
    assert places == set(doc_blocks.PLACES), places
    here = sum(block.place == "here" for page in PAGES for block in doc_blocks.blocks(page))
    assert here >= 50, here


@pytest.mark.parametrize(
    "page", [str(page) for page in PAGES if any(b.place == "here" for b in doc_blocks.blocks(page))]
)
def test_page(page):
    before = {name: getattr(jax.config, name) for name in ("jax_enable_x64",)}
    try:
        doc_blocks.run(pathlib.Path(page))
    finally:
        # A page that changes jax's configuration changes it for itself only.
        for name, value in before.items():
            jax.config.update(name, value)


@pytest.mark.parametrize(
    "page", [str(page) for page in PAGES if any(b.place == "here" for b in doc_blocks.blocks(page))]
)
def test_page_on_one_device(page):
    """As on a reader's laptop: a fresh process with one CPU device (no
    XLA_FLAGS), where a page that needs several devices sets them up itself."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    done = subprocess.run(
        [sys.executable, doc_blocks.__file__, "--one-device", page],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip().endswith("blocks ran"), done.stdout


@pytest.mark.parametrize(
    "page", [str(page) for page in PAGES if any(b.place == "here" for b in doc_blocks.blocks(page))]
)
def test_page_block_by_block(page):
    """As a reader who lands on a block: a fresh namespace, the earlier
    blocks its note names (tools/docs/block_needs.py), then the block."""
    before = {name: getattr(jax.config, name) for name in ("jax_enable_x64",)}
    try:
        assert doc_blocks.run_standalone(pathlib.Path(page)) >= 1
    finally:
        for name, value in before.items():
            jax.config.update(name, value)


def test_a_block_missing_what_it_needs_fails(tmp_path):
    page = tmp_path / "page.md"
    first = "```python\nimport numpy as np\nx = np.ones(2)\n```\n\n"
    page.write_text(first + "```python\nassert np.sum(x) == 2\n```\n")
    assert doc_blocks.run_standalone(page) == 2
    # Its own imports broken: the block fails, and so would every block after it.
    page.write_text(first.replace("import numpy as np\n", "") + "```python\nprint(x)\n```\n")
    with pytest.raises(AssertionError, match=r"page.md:2: .*NameError: name 'np'"):
        doc_blocks.run_standalone(page)
