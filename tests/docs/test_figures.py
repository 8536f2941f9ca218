"""The site's figures and quoted numbers (docs/sphinx/figures.py): their data
holds what it says, every figure is shown with alt text, every draw is the
same file, and the pages' numbers come from the data alone. The browser sees
them in tests/docs/test_docs.py."""

import copy
import json
import math
import os
import pathlib
import re
import xml.etree.ElementTree as ElementTree
import zipfile

import figure_data
import figures
import pytest

DATA = pathlib.Path("docs/figure_data")  # in the runfiles
PAGES = pathlib.Path("docs")
# A figure block and its options (MyST's YAML form: a one-line ":alt:" is all
# MyST reads of a multi-line one).
FIGURE_BLOCK = re.compile(r"```\{figure\} /_figures/(\w+)\.svg\n---\n(.*?)\n---\n", re.S)


@pytest.fixture(scope="module")
def data():
    return figures.load(DATA)


def test_the_spline_data_is_what_the_ops_compute(data):
    """docs/figure_data/spline_orders.json against a fresh computation with
    xlabind.ops and SciPy (docs/sphinx/figure_data.py): the curves to 1e-9,
    the distances from SciPy to within a factor of 10 (they are rounding
    errors, which move with the CPU's vector kernels)."""
    snapshot, fresh = data["spline_orders"], figure_data.compute()
    assert snapshot["samples"] == fresh["samples"] and snapshot["mode"] == fresh["mode"]
    assert snapshot["at"] == pytest.approx(fresh["at"], abs=1e-12)
    assert snapshot["curves"].keys() == fresh["curves"].keys()
    for order, curve in fresh["curves"].items():
        assert snapshot["curves"][order] == pytest.approx(curve, abs=1e-9), order
    ours = snapshot["accuracy"]["max_error_over_max_value"]
    theirs = fresh["accuracy"]["max_error_over_max_value"]
    assert ours.keys() == theirs.keys()
    for dtype, by_order in theirs.items():
        assert ours[dtype].keys() == by_order.keys()
        for order, error in by_order.items():
            floor = 1e-18  # an exact result is 0
            gap = abs(math.log10(max(error, floor)) - math.log10(max(ours[dtype][order], floor)))
            assert gap <= 1, (dtype, order, error, ours[dtype][order])
    assert max(theirs["float64"].values()) < 1e-12


def test_the_roofline_data_is_one_benchmark_run(data):
    """roofline.json is what `benchmark --roofline --json` writes, of a full
    run (not --quick): every row the figures read, each row's fraction its
    bound over its time."""
    run = data["roofline"]
    rows = run["roofline"]["rows"]
    seen = {
        (r["workload"]["op"], r["workload"]["kind"], r["workload"]["order"], r["workload"]["side"])
        for r in rows
        if r["workload"]["dtype"] == figures.SPEED_DTYPE
    }
    for side in (64, 256):
        for kind in ("values", "grid gradient", "coordinate gradient"):
            # Order 0 is piecewise constant: no gradient in the coordinates.
            for order in range(1 if kind == "coordinate gradient" else 0, 6):
                assert ("map_coordinates", kind, order, side) in seen, (kind, order, side)
        for order in range(2, 6):
            assert ("spline_filter", "values", order, side) in seen, (order, side)
    for row in rows:
        bound = row["bounds_ms"]["bound"]
        assert row["fraction_of_bound"] == pytest.approx(bound / row["ms"]["xlabind"])
    environment = run["environment"]
    assert environment["cpu_count"] >= 1 and environment["jax"] and environment["cpu"]


def test_every_draw_is_the_same_svg(data):
    """Byte for byte (the quick site equals the full one, and a rebuild
    changes nothing), with a size for the browser and no date."""
    for name, draw in figures.FIGURES.items():
        first, second = draw(data), draw(data)
        assert first == second, name
        root = ElementTree.fromstring(first)
        assert root.tag.endswith("svg") and root.get("viewBox"), name
        assert re.fullmatch(r"[\d.]+pt", root.get("width") or ""), name
        assert "<dc:date>" not in first, name


def shown_figures() -> dict[str, list[tuple[pathlib.Path, str]]]:
    """Each figure a page shows, with the page and the block's alt text."""
    shown: dict[str, list[tuple[pathlib.Path, str]]] = {}
    for page in sorted(PAGES.rglob("*.md")):
        for match in FIGURE_BLOCK.finditer(page.read_text()):
            alt = re.search(r"^alt: >-\n((?:  .*\n?)+)", match.group(2), re.M)
            alt = " ".join(alt.group(1).split()) if alt else ""
            shown.setdefault(match.group(1), []).append((page, alt))
    return shown


def test_every_figure_is_shown_with_alt_text():
    shown = shown_figures()
    assert shown.keys() == figures.FIGURES.keys()
    for name, places in shown.items():
        for page, alt in places:
            assert len(alt) >= 60, f"{page}: figure {name} has too short an alt text: {alt!r}"


def test_the_pages_quote_only_what_the_data_gives(data):
    """Every {{ name }} a page uses is a number of the data's; the Speed
    section writes no time or ratio of its own."""
    numbers = figures.numbers(data)
    for page in sorted(PAGES.rglob("*.md")):
        text = page.read_text()
        for name in re.findall(r"\{\{\s*(\w+)\s*\}\}", text):
            assert name in numbers, f"{page}: {{{{ {name} }}}} is not in figures.numbers()"
    guide = (PAGES / "guides" / "interpolation.md").read_text()
    speed = guide[guide.index("## Speed") :]
    # Times, ratios and fractions of the bound; "100%" (the bound itself) and
    # "~10%" (how much runs differ) are definitions, not measurements.
    written = re.findall(r"(?<![~\d.])(?!100%)\d[\d.,]*\s*(?:ms|µs|×|%)", speed)
    assert not written, f"the Speed section writes numbers the data should give: {written}"


def test_a_changed_run_changes_the_table_and_the_prose(data):
    """The numbers follow the data: twice the time for order 3's values
    halves its ratios, in the prose's numbers and in the table."""
    before = figures.numbers(data)
    slower = copy.deepcopy(data)
    for row in slower["roofline"]["roofline"]["rows"]:
        w = row["workload"]
        if (w["op"], w["kind"], w["order"], w["side"], w["dtype"]) == (
            "map_coordinates",
            "values",
            3,
            figures.SPEED_GRID,
            figures.SPEED_DTYPE,
        ):
            row["ms"]["xlabind"] *= 2
    after = figures.numbers(slower)
    assert after["order3_ms"] != before["order3_ms"]
    ratio = float(before["order3_scipy_ratio"].rstrip("×"))
    assert float(after["order3_scipy_ratio"].rstrip("×")) == pytest.approx(ratio / 2, rel=0.1)
    assert after["speed_table"] != before["speed_table"]
    assert json.dumps(after) != json.dumps(before)


def test_the_measuring_tables_are_the_runs_json(data):
    """The measuring page's tables: a row for every row of the roofline run,
    the machine it ran on, and a device run's tables as the runbook wrote
    them (tools/device_check.py's benchmark.json)."""
    tables = figures.measuring_tables(data)
    rows = data["roofline"]["roofline"]["rows"]
    assert tables["roofline_rows"].count("\n") == len(rows) + 1  # and the header's two lines
    assert data["roofline"]["environment"]["cpu"] in tables["roofline_machine"]
    device = {
        "platform": "tpu",
        "date": "2026-12-07",
        "report": ["Python 3.11.7", "jax devices: tpu: 1 x TPU v5 lite"],
        "tables": [
            {"title": "The cost of a call", "header": ["n", "ms"], "rows": [["256", "1.1"]]}
        ],
    }
    runs = figures.measuring_tables({**data, "device_tpu": device})["device_runs"]
    assert "**tpu**, 2026-12-07: jax devices: tpu: 1 x TPU v5 lite." in runs
    assert "*The cost of a call*\n\n| n | ms |\n| --- | --- |\n| 256 | 1.1 |" in runs
    recorded = [name for name in data if name.startswith("device_")]
    assert ("No device run" in tables["device_runs"]) == (not recorded)


def test_the_site_has_no_image_but_the_drawn_figures():
    """Every image of the built site is one figures.py drew: none is
    committed by hand, none is left over from a figure removed."""
    with zipfile.ZipFile("docs/sphinx/html.zip") as site:
        images = {
            pathlib.PurePosixPath(name).name
            for name in site.namelist()
            if name.startswith("_images/")
        }
    assert images == {f"{name}.svg" for name in figures.FIGURES}


def test_a_bazel_test_keeps_matplotlibs_cache_in_its_own_temporary_folder():
    # The test runner skips Python's teardown, so a folder of figures.py's own
    # would outlive every test process that draws.
    assert os.environ["MPLCONFIGDIR"].startswith(os.environ["TEST_TMPDIR"])
    assert pathlib.Path(os.environ["MPLCONFIGDIR"]).is_dir()  # matplotlib wrote it
