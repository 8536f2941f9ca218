"""The documentation site (//tools/docs:html), read as a reader would: every
public name has a docstring, an example and an entry in the API reference;
no internal link is broken; and Debian's Chromium, headless, renders the
index, the API page and a guide with the names on them (a screenshot of each
is kept as a test output: bazel-testlogs/tests/test_docs/test.outputs/)."""

import html.parser
import importlib
import inspect
import os
import pathlib
import shutil
import subprocess
import tempfile
import urllib.parse
import zipfile

import pytest

SITE_ZIP = pathlib.Path("tools/docs/html.zip")  # in the runfiles
MODULES = ["xlabind", "xlabind.ops", "xlabind.cuda", "xlabind.jaxbind"]
GUIDE = "guide-spline-interpolation-map-coordinates-of-orders-2-to-5.html"


@pytest.fixture(scope="module")
def site():
    folder = pathlib.Path(tempfile.mkdtemp(prefix="xlabind-site-"))
    with zipfile.ZipFile(SITE_ZIP) as archive:
        archive.extractall(folder)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def public_names():
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            yield module_name, name, getattr(module, name)


def test_every_public_name_has_a_docstring_and_an_example():
    lacking = []
    for module_name, name, obj in public_names():
        if callable(obj):
            doc = inspect.getdoc(obj) if obj.__doc__ else ""
            if not doc:
                lacking.append(f"{module_name}.{name}: no docstring")
            elif ">>>" not in doc:
                lacking.append(f"{module_name}.{name}: no example (>>>) in its docstring")
    assert not lacking, "\n".join(lacking)


class _Page(html.parser.HTMLParser):
    """The ids and the links of one page."""

    def __init__(self):
        super().__init__()
        self.ids, self.links, self.text = set(), [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "a" and "href" in attrs:
            self.links.append(attrs["href"])

    def handle_data(self, data):
        self.text.append(data)


def parse(path: pathlib.Path) -> _Page:
    page = _Page()
    page.feed(path.read_text())
    return page


def test_every_public_name_is_in_the_reference(site):
    api = parse(site / "api.html")
    missing = [f"{m}.{n}" for m, n, _ in public_names() if f"{m}.{n}" not in api.ids]
    assert not missing, f"not in the API reference: {missing}"


def test_no_internal_link_is_broken(site):
    pages = {path: parse(path) for path in site.rglob("*.html")}
    broken = []
    for path, page in pages.items():
        for href in page.links:
            parts = urllib.parse.urlsplit(href)
            if parts.scheme or href.startswith("mailto:"):
                continue
            target = (path.parent / urllib.parse.unquote(parts.path)).resolve() if parts.path \
                else path
            if not target.exists():
                broken.append(f"{path.name}: {href} (no such file)")
            elif parts.fragment and target.suffix == ".html" and target in pages \
                    and parts.fragment not in pages[target].ids:
                broken.append(f"{path.name}: {href} (no such anchor)")
    assert not broken, "\n".join(broken)
    assert len(pages) > 10 and (site / "searchindex.js").exists()


def test_guides_link_into_the_reference(site):
    guide = parse(site / GUIDE)
    assert any(link.startswith("api.html#xlabind.ops.map_coordinates") for link in guide.links)
    tutorial = next(site.glob("guide-tutorial-*.html"))
    assert any(link.startswith("api.html#xlabind.callback") for link in parse(tutorial).links)


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("the docs' browser test needs Debian's Chromium: apt-get install chromium "
                "(.ci/run and tools/bazel's first run install it)")


def render(site: pathlib.Path, page: str, screenshot: str | None = None, query: str = "") -> str:
    """The page's DOM after Chromium (headless) has rendered it and run its
    scripts; optionally a screenshot of it, kept among the test's outputs."""
    profile = tempfile.mkdtemp(prefix="xlabind-chromium-")
    common = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
              f"--user-data-dir={profile}", "--window-size=1280,1600",
              "--virtual-time-budget=5000"]
    url = (site / page).as_uri() + query
    try:
        dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True,
                             timeout=120)
        assert dom.returncode == 0, dom.stderr[-2000:]
        if screenshot:
            outputs = pathlib.Path(os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR",
                                                  tempfile.gettempdir()))
            shot = outputs / screenshot
            done = subprocess.run([*common, f"--screenshot={shot}", url], capture_output=True,
                                  text=True, timeout=120)
            assert done.returncode == 0 and shot.stat().st_size > 10_000, done.stderr[-2000:]
        return dom.stdout
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def test_a_browser_renders_the_index_the_reference_and_a_guide(site):
    index = render(site, "index.html", "docs_index.png")
    assert "Two commands" in index and "API reference" in index
    api = render(site, "api.html", "docs_api.png")
    missing = [f"{m}.{n}" for m, n, _ in public_names() if f'id="{m}.{n}"' not in api]
    assert not missing, f"the rendered API page lacks {missing}"
    guide = render(site, GUIDE, "docs_guide.png")
    assert "xlabind.ops.map_coordinates" in guide and "spline_filter" in guide
    # Searching runs in the browser, on the site's search index.
    search = render(site, "search.html", "docs_search.png", query="?q=spline_filter")
    assert 'href="api.html#xlabind.ops.spline_filter"' in search, search[-3000:]
