"""The documentation site (//docs/sphinx:html) as a reader gets it: served on
http://127.0.0.1 (as `tools/bazel run //docs/sphinx:open` serves it) and opened
in Debian's Chromium, headless, at 1,280 and 390 px. Every public name has a
docstring, an example and an entry in the reference; code fits its box on a
wide window, on every page with code (the generated API pages too), and no
page is wider than a phone's; every internal link and anchor resolves; search
ranks the reference first, with snippets.

Every page at every width and every search are frames of one page, opened by
one Chromium run (a start costs more than a page); in the default loop the
pages with code and the searches are a sample (tests/support/cases.py), all
of them under --config=all. Its screenshot is kept as a
test output (bazel-testlogs/tests/docs/test_docs_and_readme/test.outputs/
outputs.zip): docs_pages_and_searches.png, the frames top to bottom."""

import functools
import html.parser
import http.server
import importlib
import inspect
import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import threading
import urllib.parse
import urllib.request
import zipfile

import cases
import pytest

SITE_ZIP = pathlib.Path("docs/sphinx/html.zip")  # in the runfiles
DOCS = pathlib.Path("docs")
MODULES = {
    "xlabind": "api/xlabind.html",
    "xlabind.ops": "api/ops.html",
    "xlabind.cuda": "api/cuda.html",
    "xlabind.jaxbind": "api/jaxbind.html",
}
# The pages a newcomer opens first.
PAGES = {
    "landing": "index.html",
    "tutorial": "guides/tutorial.html",
    "native_first_op": "native/first-op.html",
    "gpu": "guides/gpu.html",
    "api": "api/xlabind.html",
    "parameters": "api/parameters.html",
    # The other pages with figures.
    "interpolation": "guides/interpolation.html",
    "semantics": "semantics.html",
}
WIDTHS = (1280, 390)
# Every page with code, the generated API pages too (api/native-helpers.html
# quotes the headers), is checked once more for code wider than its box: in a
# 1,280 px window less a desktop browser's vertical scrollbar (Chromium's
# classic one, 15 px; the frames here hide theirs), the width a reader's
# window leaves the page. Only widths matter there, so the frames are short.
CODE_WIDTH = 1280 - 15
CODE_HEIGHT = 120
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
    // Code in tables laid out on more than one line: a value a reader copies
    // would be broken inside.
    broken: [...document.querySelectorAll("article table code")]
      .filter(c => c.getClientRects().length > 1).map(c => c.textContent),
    // The figures (docs/sphinx/figures.py): drawn, described, and as wide as
    // the text column, not wider.
    figures: [...document.querySelectorAll("article img")].map(img => ({
      src: img.getAttribute("src"), alt: img.alt,
      drawn: img.complete && img.naturalWidth > 0,
      width: img.getBoundingClientRect().width,
      column: (img.closest("section") || img.closest("article")).getBoundingClientRect().width,
      right: img.getBoundingClientRect().right})),
    // The page's table of contents, where it has one: on screen?
    toc: (() => {
      const links = document.querySelectorAll(".toc-tree a");
      if (links.length < 2) return null;
      const box = document.querySelector(".toc-drawer").getBoundingClientRect();
      return box.width > 100 && box.left >= 0 && box.right <= window.innerWidth + 1;
    })(),
  };
  if (window.parent !== window) window.parent.postMessage(report, "*");
  const out = document.createElement("script");
  out.type = "application/json";
  out.id = "xlabind-measurements";
  out.textContent = JSON.stringify(report);
  document.body.appendChild(out);
}, 300));
</script>"""
# The frames' heights: what a reader sees first of each.
FRAME_HEIGHT = {1280: 800, 390: 844}
SEARCH_HEIGHT = 800
# Each frame of the page below reports to it (MEASURE); the searches' result
# lists are read from their frames once the index has answered. Everything is
# written into the DOM for --dump-dom, keyed by frame.
# The listener comes before the frames, so that no report arrives before it
# does; and a page frame whose message was lost anyway (a busy machine) is read
# from its own DOM, where MEASURE writes the same report.
ALL = """<!doctype html><html><body style="margin: 0">
<script>
const reports = {{}};
window.addEventListener("message", event => {{
  for (const frame of document.querySelectorAll("iframe"))
    if (frame.contentWindow === event.source) reports[frame.id] = event.data;
}});
</script>
{frames}
<script>
window.addEventListener("load", () => setTimeout(() => {{
  for (const frame of document.querySelectorAll("iframe.page")) {{
    const written = frame.contentDocument &&
      frame.contentDocument.getElementById("xlabind-measurements");
    if (!(frame.id in reports) && written) reports[frame.id] = JSON.parse(written.textContent);
  }}
  for (const frame of document.querySelectorAll("iframe.search")) {{
    const list = frame.contentDocument.querySelector("ul.search");
    reports[frame.id] = list ? list.outerHTML : "";
  }}
  const out = document.createElement("script");
  out.type = "application/json";
  out.id = "xlabind-measurements";
  out.textContent = JSON.stringify(reports).replace(/</g, "\\u003c");
  document.body.appendChild(out);
}}, 5000));
</script></body></html>"""
FRAME = (
    '<iframe id="{id}" class="{kind}" src="{src}" '
    'style="display: block; width: {width}px; height: {height}px; border: 0"></iframe>'
)


class _Handler(http.server.SimpleHTTPRequestHandler):
    """The site's files; with ?measure, an HTML page gets the script above."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        if url.path == "/_all":
            body = ALL.format(frames="\n".join(frame for frame, _ in frames())).encode()
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
        ("127.0.0.1", 0), functools.partial(_Handler, directory=str(folder))
    )
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


def test_page_titles_are_distinct():
    """What a search result or a browser tab shows: no two pages alike."""
    with zipfile.ZipFile(SITE_ZIP) as archive:
        titles = {}
        for name in archive.namelist():
            if name.endswith(".html") and not name.startswith(("_", "genindex", "search")):
                found = re.search(r"<title>(.*?)</title>", archive.read(name).decode(), re.S)
                titles.setdefault(" ".join(found.group(1).split()), []).append(name)
    assert len(titles) >= 20, titles
    assert not {t: n for t, n in titles.items() if len(n) > 1}, titles


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
                if (
                    parts.fragment
                    and urllib.parse.unquote(parts.fragment) not in parsed[target].ids
                ):
                    broken.append(f"{page}: {href} (no such anchor)")
            elif not (folder / target).is_file():
                broken.append(f"{page}: {href} (no such file)")
    assert not broken, "\n".join(sorted(set(broken)))
    assert len(pages) > 25 and checked > 1000, (len(pages), checked)


def test_pages_offer_their_code_as_one_script_and_name_what_each_block_needs(site):
    """A page with several Python blocks links its code as one script (every
    block but the multi-process ones, in order); a block that needs earlier
    ones says which, linked (the link check above resolves them)."""
    import doc_blocks

    _, folder = site
    pages = [p for p in DOCS.rglob("*.md") if p.name != "BUILD.bazel"]
    scripts = 0
    for page in pages:
        runnable = [b for b in doc_blocks.blocks(page) if b.place != "multiprocess"]
        name = page.relative_to(DOCS).with_suffix("")
        script = folder / "_scripts" / f"{name}.py"
        if len(runnable) < 2:
            assert not script.exists(), script
            continue
        scripts += 1
        text = script.read_text()
        at = 0
        for block in runnable:
            at = text.index(block.code.rstrip("\n"), at)  # in order, each whole
        html = (folder / f"{name}.html").read_text()
        assert f'_scripts/{name.as_posix()}.py"' in html.split("xlabind-script", 1)[1][:300]
    assert scripts >= 6, scripts
    tutorial = (folder / "guides" / "tutorial.html").read_text()
    assert tutorial.count('class="xlabind-needs"') >= 10
    assert re.search(r'xlabind-needs">Needs block <a [^>]*href="#code-1"', tutorial)


def test_bazel_macros_list_parameters_as_the_python_reference_does(site):
    """The macros' ``:param x:`` fields render as the Python entries' do (a
    "Parameters" list with each name in bold), not one "Param x" label each."""
    _, folder = site
    text = (folder / "api" / "bazel-macros.html").read_text()
    assert not re.search(r'<dt class="field-\w+">Param ', text)
    # Every macro with parameters: xlabind_ffi_library, _extension, _dependencies.
    assert text.count(">Parameters<") >= 3, text.count(">Parameters<")
    assert "<strong>handlers</strong>" in text and "<strong>deps</strong>" in text


def test_guides_link_names_into_the_reference(site):
    address, _ = site
    links = lambda page: parse(fetch(address + page)).links
    assert any(
        link.endswith("api/ops.html#xlabind.ops.map_coordinates")
        for link in links("guides/interpolation.html")
    )
    assert any(
        link.endswith("api/xlabind.html#xlabind.nonlinear")
        for link in links("guides/tutorial.html")
    )
    assert any(
        "api/bazel-macros.html#bzl-macro-xlabind_extension" in link
        for link in links("native/first-op.html")
    )
    assert any(
        "api/native-helpers.html#native-helper-" in link
        for link in links("native/capabilities.html")
    )


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(
        "the docs' browser test needs Debian's Chromium: apt-get install chromium "
        "(.ci/run and tools/bazel's first run install it)"
    )


def browse(url: str, width: int, height: int, screenshot: str) -> str:
    """The page's DOM once Chromium (headless) has rendered it and run its
    scripts, and its screenshot among the test's outputs, taken by the same
    run."""
    profile = tempfile.mkdtemp(prefix="xlabind-chromium-")
    outputs = pathlib.Path(os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR", tempfile.gettempdir()))
    shot = outputs / screenshot
    shot.unlink(missing_ok=True)
    command = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
        "--virtual-time-budget=20000",
        "--dump-dom",
        f"--screenshot={shot}",
    ]
    try:
        done = subprocess.run([*command, url], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert shot.is_file() and shot.stat().st_size > 10_000, done.stderr[-2000:]
        return done.stdout
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def measurements(dom: str) -> dict:
    start = dom.index('id="xlabind-measurements">') + len('id="xlabind-measurements">')
    return json.loads(dom[start : dom.index("</script>", start)])


@functools.cache
def code_pages() -> list[str]:
    """Every page of the site that shows a code block (<pre>)."""
    with zipfile.ZipFile(SITE_ZIP) as archive:
        return sorted(
            name
            for name in archive.namelist()
            if name.endswith(".html") and not name.startswith("_") and b"<pre" in archive.read(name)
        )


def checked_code_pages() -> list[str]:
    """The pages with code that Chromium renders: every one, or a sample in
    the default loop (tests/support/cases.py; each page's frame costs the
    render about a third of a second)."""
    return cases.some("code pages", code_pages(), sampled=6)


def frames():
    """(iframe, height) for each page at each width, each page with code at
    CODE_WIDTH, then each search."""

    def frame(id: str, kind: str, src: str, width: int, height: int):
        return FRAME.format(id=id, kind=kind, src=src, width=width, height=height), height

    for name, page in PAGES.items():
        for width in WIDTHS:
            yield frame(f"{name}_{width}", "page", f"/{page}?measure", width, FRAME_HEIGHT[width])
    for page in checked_code_pages():
        yield frame(f"code_{page}", "page", f"/{page}?measure", CODE_WIDTH, CODE_HEIGHT)
    for query in [*CHECKED_SEARCHES, *MATH_SEARCHES]:
        yield frame(f"search_{query}", "search", f"/search.html?q={query}", 1280, SEARCH_HEIGHT)


@pytest.fixture(scope="module")
def rendered(site):
    """What each frame of /_all reported, by frame id."""
    address, _ = site
    height = sum(height for _, height in frames())
    return measurements(
        browse(f"{address}_all", max(WIDTHS), height, "docs_pages_and_searches.png")
    )


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", PAGES)
def test_pages_fit_the_window(rendered, name, width):
    seen = rendered.get(f"{name}_{width}")
    assert seen is not None, f"{PAGES[name]} at {width} px never reported: {sorted(rendered)}"
    assert seen["window"] == width and seen["pres"] > 0, seen
    if width >= 1280:  # code fits its box: nothing to scroll sideways
        assert not seen["overflowing"], seen["overflowing"]
    assert seen["page"] <= width, f"{PAGES[name]} is {seen['page']} px wide at {width} px"
    assert not seen["broken"], f"{PAGES[name]} at {width} px breaks {seen['broken']}"
    if width >= 1280 and name in ("tutorial", "native_first_op"):  # pages with sections
        assert seen["toc"] is True, f"{PAGES[name]}: no table of contents in view: {seen}"


def test_code_fits_its_box_on_every_page(rendered):
    """No code block of any page, generated or written, is cut off in a
    1,280 px window with a scrollbar (CODE_WIDTH): nothing to scroll
    sideways."""
    every = code_pages()
    assert "api/native-helpers.html" in every and len(every) >= 20, every
    pages = checked_code_pages()
    silent = [page for page in pages if f"code_{page}" not in rendered]
    assert not silent, f"never reported: {silent}"
    for page in pages:
        seen = rendered[f"code_{page}"]
        assert seen["window"] == CODE_WIDTH and seen["pres"] > 0, (page, seen)
        assert seen["page"] <= CODE_WIDTH, f"{page} is {seen['page']} px wide at {CODE_WIDTH} px"
    overflowing = {
        page: rendered[f"code_{page}"]["overflowing"]
        for page in pages
        if rendered[f"code_{page}"]["overflowing"]
    }
    assert not overflowing, (
        f"code wider than its box at {CODE_WIDTH} px (a 1,280 px window with a "
        f"scrollbar):\n{json.dumps(overflowing, indent=1)}"
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_every_figure_is_drawn_and_fits_at_both_widths(site, rendered, width):
    """Each figure the build drew (the site's _images/*.svg) shows on a page
    at this width: loaded, with alt text, as wide as the text column (a
    phone's too) and no wider than the window."""
    _, folder = site
    drawn = {path.name for path in (folder / "_images").glob("*.svg")}
    assert len(drawn) >= 6, sorted(drawn)
    seen = set()
    for name in PAGES:
        for figure in rendered[f"{name}_{width}"]["figures"]:
            where = f"{PAGES[name]} at {width} px: {figure['src']}"
            assert figure["drawn"], f"{where} did not load"
            assert len(figure["alt"]) >= 60, f"{where}: alt text {figure['alt']!r}"
            assert figure["right"] <= width + 1, f"{where} runs off the window: {figure}"
            assert figure["width"] >= 0.95 * figure["column"] - 1, f"{where} is narrow: {figure}"
            assert figure["width"] <= figure["column"] + 1, f"{where} is too wide: {figure}"
            seen.add(pathlib.PurePosixPath(figure["src"]).name)
    assert seen == drawn, f"figures on no page checked here: {sorted(drawn - seen)}"


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
    "map_coordinates": ["api/ops.html#xlabind.ops.map_coordinates"],
    "spline_filter": ["api/ops.html#xlabind.ops.spline_filter"],
    "xlabind_extension": ["api/bazel-macros.html#bzl-macro-xlabind_extension"],
    "XLABIND_RETURN_IF_ERROR": ["api/native-helpers.html#native-helper-XLABIND_RETURN_IF_ERROR"],
    "in_place": ["api/parameters.html#parameter-in_place"],
    "vmap_method": ["api/parameters.html#parameter-vmap_method"],
}


CHECKED_SEARCHES = cases.some("searches", list(SEARCHES), sampled=3)


# Searches whose snippets quote a page's math, and text the snippet shows.
MATH_SEARCHES = {"continuously": "k - 1 times continuously"}


@pytest.mark.parametrize("query", MATH_SEARCHES)
def test_search_snippets_show_math_as_text(rendered, query):
    """A snippet quoting math shows it as text (static/search_math.js), not
    as its TeX source ("\\(k - 1\\)")."""
    results = _Results()
    results.feed(rendered[f"search_{query}"])
    quoting = [text for _, text in results.results if MATH_SEARCHES[query] in text]
    assert quoting, results.results[:5]
    for text in quoting:
        assert not re.search(r"\\[()\[\]]|\\[a-z]+|\^\{", text), text


@pytest.mark.parametrize("query", CHECKED_SEARCHES)
def test_search_lists_the_reference_first_with_snippets(site, rendered, query):
    address, _ = site
    listed = rendered[f"search_{query}"]
    parser = _Results()
    parser.feed(listed)
    results = parser.results
    assert len(results) >= 3, listed[-3000:]
    first = urllib.parse.urljoin(address + "search.html", results[0][0])
    assert first.removeprefix(address) in SEARCHES[query], [r[0] for r in results[:5]]
    snippets = [text for link, text in results if "#" not in link and text.strip()]
    assert snippets, f"no snippets under the page results of {query!r}: {results[:5]}"
