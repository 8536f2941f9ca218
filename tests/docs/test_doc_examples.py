"""Every Python block of the documentation runs (tests/support/doc_blocks.py):
each page's blocks in order, in one namespace, as a reader runs them, with 8
CPU devices and, in a process of its own, with one; the
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
