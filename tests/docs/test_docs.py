"""The documentation site (//tools/docs:html) as a reader gets it: served on
http://127.0.0.1 (as `tools/bazel run //tools/docs:open` serves it) and opened
in Debian's Chromium, headless, at 1,280 and 390 px. Every public name has a
docstring, an example and an entry in the reference; code fits its box on a
wide window and no page is wider than a phone's; every internal link and
anchor resolves; search ranks the reference first, with snippets.

Screenshots are kept as test outputs (bazel-testlogs/tests/docs/test_docs/
test.outputs/outputs.zip): docs_<page>_<width>.png for each page below, and
docs_search_<query>.png."""

import functools
import html.parser
import http.server
import importlib
import inspect
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import threading
import urllib.parse
import urllib.request
import zipfile

import pytest

SITE_ZIP = pathlib.Path("tools/docs/html.zip")  # in the runfiles
MODULES = {"xlabind": "api/xlabind.html", "xlabind.ops": "api/ops.html",
           "xlabind.cuda": "api/cuda.html", "xlabind.jaxbind": "api/jaxbind.html"}
# The pages a newcomer opens first.
PAGES = {"landing": "index.html", "tutorial": "guides/tutorial.html",
         "native_first_op": "native/first-op.html", "gpu": "guides/gpu.html",
         "api": "api/xlabind.html"}
WIDTHS = (1280, 390)
# Measured in the page once it has rendered, and written into the DOM for
# --dump-dom to carry out.
MEASURE = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const pres = [...document.querySelectorAll("article pre")];
  const report = {
    window: window.innerWidth,
    page: document.documentElement.scrollWidth,
    pres: pres.length,
    overflowing: pres.filter(p => p.scrollWidth > p.clientWidth + 1).map(p => ({
      text: p.textContent.slice(0, 80), content: p.scrollWidth, box: p.clientWidth})),
  };
  if (window.parent !== window) window.parent.postMessage(report, "*");
  const out = document.createElement("script");
  out.type = "application/json";
  out.id = "xlabind-measurements";
  out.textContent = JSON.stringify(report);
  document.body.appendChild(out);
}, 300));
</script>"""
# Headless Chromium's window is at least 500 px wide: a phone's width is a
# frame of that width, which reports the page's measurements to its parent.
FRAME = """<!doctype html><html><body style="margin: 0">
<iframe src="/{page}?measure" style="width: {width}px; height: 844px; border: 0"></iframe>
<script>
window.addEventListener("message", event => {{
  const out = document.createElement("script");
  out.type = "application/json";
  out.id = "xlabind-measurements";
  out.textContent = JSON.stringify(event.data);
  document.body.appendChild(out);
}});
</script></body></html>"""


class _Handler(http.server.SimpleHTTPRequestHandler):
    """The site's files; with ?measure, an HTML page gets the script above."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        if url.path == "/_frame":
            body = FRAME.format(page=query["page"][0], width=int(query["width"][0])).encode()
        elif "measure" in query:
            page = pathlib.Path(self.directory) / url.path.lstrip("/")
            body = page.read_text().replace("</body>", MEASURE + "</body>").encode()
        else:
            return super().do_GET()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def site():
    """The site's address on 127.0.0.1, and its unpacked folder."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="xlabind-site-"))
    with zipfile.ZipFile(SITE_ZIP) as archive:
        archive.extractall(folder)
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Handler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", folder
    server.shutdown()
    shutil.rmtree(folder, ignore_errors=True)


def public_names():
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            yield module_name, name, getattr(module, name)


def test_every_public_function_and_class_has_a_docstring_with_an_example():
    lacking = []
    for module_name, name, obj in public_names():
        if not (inspect.isclass(obj) or inspect.isroutine(obj)) or obj.__name__ != name:
            continue  # constants, type aliases, other names of a class: a #: comment
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
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag in ("a", "link") and attrs.get("href"):
            self.links.append(attrs["href"])
        if tag in ("script", "img") and attrs.get("src"):
            self.links.append(attrs["src"])


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200, url
        return response.read().decode("utf-8", "replace")


def parse(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    return page


def test_every_public_name_is_in_its_modules_reference(site):
    address, _ = site
    ids = {module: parse(fetch(address + page)).ids for module, page in MODULES.items()}
    missing = [f"{m}.{n}" for m, n, _ in public_names() if f"{m}.{n}" not in ids[m]]
    assert not missing, f"not in the API reference: {missing}"


def test_every_internal_link_and_anchor_resolves(site):
    address, folder = site
    pages = {path.relative_to(folder).as_posix() for path in folder.rglob("*.html")}
    parsed = {page: parse(fetch(address + page)) for page in pages}
    broken, checked = [], 0
    for page, content in parsed.items():
        for href in content.links:
            url = urllib.parse.urljoin(address + page, href)
            parts = urllib.parse.urlsplit(url)
            if not url.startswith(address):
                assert parts.scheme in ("http", "https", "mailto"), f"{page}: {href}"
                continue  # the only external links: furo's and Sphinx's credits
            target = parts.path[1:] or "index.html"
            checked += 1
            if target in parsed:
                if parts.fragment and urllib.parse.unquote(parts.fragment) not in \
                        parsed[target].ids:
                    broken.append(f"{page}: {href} (no such anchor)")
            elif not (folder / target).is_file():
                broken.append(f"{page}: {href} (no such file)")
    assert not broken, "\n".join(sorted(set(broken)))
    assert len(pages) > 25 and checked > 1000, (len(pages), checked)


def test_guides_link_names_into_the_reference(site):
    address, _ = site
    links = lambda page: parse(fetch(address + page)).links  # noqa: E731
    assert any(link.endswith("api/ops.html#xlabind.ops.map_coordinates")
               for link in links("guides/interpolation.html"))
    assert any(link.endswith("api/xlabind.html#xlabind.nonlinear")
               for link in links("guides/tutorial.html"))
    assert any("api/bazel-macros.html#bzl-macro-xlabind_extension" in link
               for link in links("native/first-op.html"))
    assert any("api/native-helpers.html#native-helper-" in link
               for link in links("native/capabilities.html"))


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("the docs' browser test needs Debian's Chromium: apt-get install chromium "
                "(.ci/run and tools/bazel's first run install it)")


def browse(url: str, width: int, screenshot: str | None = None) -> str:
    """The page's DOM once Chromium (headless) has rendered it and run its
    scripts; optionally a screenshot of it among the test's outputs, taken by
    the same run (a Chromium start costs more than the page)."""
    profile = tempfile.mkdtemp(prefix="xlabind-chromium-")
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--hide-scrollbars", f"--user-data-dir={profile}",
               f"--window-size={max(width, 500)},{1600 if width > 1000 else 900}",
               "--virtual-time-budget=8000", "--dump-dom"]
    shot = None
    if screenshot:
        outputs = pathlib.Path(os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR",
                                              tempfile.gettempdir()))
        shot = outputs / screenshot
        shot.unlink(missing_ok=True)
        command.append(f"--screenshot={shot}")
    try:
        done = subprocess.run([*command, url], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        if shot is not None:
            assert shot.is_file() and shot.stat().st_size > 10_000, done.stderr[-2000:]
        return done.stdout
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def measurements(dom: str) -> dict:
    start = dom.index('id="xlabind-measurements">') + len('id="xlabind-measurements">')
    return json.loads(dom[start:dom.index("</script>", start)])


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", PAGES)
def test_pages_fit_the_window(site, name, width):
    address, _ = site
    url = f"{address}{PAGES[name]}?measure" if width >= 500 else \
        f"{address}_frame?page={PAGES[name]}&width={width}"
    dom = browse(url, width, f"docs_{name}_{width}.png")
    seen = measurements(dom)
    assert seen["window"] == width and seen["pres"] > 0, seen
    if width >= 1280:  # code fits its box: nothing to scroll sideways
        assert not seen["overflowing"], seen["overflowing"]
    assert seen["page"] <= width, f"{PAGES[name]} is {seen['page']} px wide at {width} px"


class _Results(html.parser.HTMLParser):
    """Search results in order: (link, snippet text) for each."""

    def __init__(self):
        super().__init__()
        self.results, self._depth, self._in_snippet = [], 0, False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "ul" and "search" in (attrs.get("class") or "").split():
            self._depth = 1
        elif self._depth and tag == "li":
            self.results.append([None, ""])
        elif self._depth and tag == "a" and self.results and self.results[-1][0] is None:
            self.results[-1][0] = attrs.get("href")
        elif self._depth and tag == "p" and "context" in (attrs.get("class") or ""):
            self._in_snippet = True

    def handle_endtag(self, tag):
        if tag == "p":
            self._in_snippet = False
        elif tag == "ul":
            self._depth = 0

    def handle_data(self, data):
        if self._in_snippet and self.results:
            self.results[-1][1] += data


# What each search must list first: the reference entry (or a guide section).
SEARCHES = {
    "callback": ["api/xlabind.html#xlabind.callback"],
    "spline_filter": ["api/ops.html#xlabind.ops.spline_filter"],
    "xlabind_extension": ["api/bazel-macros.html#bzl-macro-xlabind_extension"],
    "in_place": ["api/parameters.html#parameter-in_place"],
    "vmap_method": ["api/parameters.html#parameter-vmap_method"],
}


@pytest.mark.parametrize("query", SEARCHES)
def test_search_lists_the_reference_first_with_snippets(site, query):
    address, _ = site
    dom = browse(f"{address}search.html?q={query}", 1280, f"docs_search_{query}.png")
    parser = _Results()
    parser.feed(dom)
    results = parser.results
    assert len(results) >= 3, dom[-3000:]
    first = urllib.parse.urljoin(address + "search.html", results[0][0])
    assert first.removeprefix(address) in SEARCHES[query], [r[0] for r in results[:5]]
    snippets = [text for link, text in results if "#" not in link and text.strip()]
    assert snippets, f"no snippets under the page results of {query!r}: {results[:5]}"
