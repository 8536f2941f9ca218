"""The site's figures and the numbers its prose quotes, drawn at build time
from the data in docs/figure_data/:

* ``spline_orders.json`` (docs/sphinx/figure_data.py): map_coordinates of
  orders 0 to 5 on a sampled signal, and each order's distance from SciPy's;
* ``roofline.json``: what ``tools/bazel run //tools:benchmark -- --roofline
  --json`` wrote (the native ops against jax, SciPy and the machine's bounds);
* ``device_<platform>.json``: what tools/device_check.py wrote on a device
  machine (its benchmark.json: the benchmark's tables and the machine).

and two diagrams drawn from code: a call's path through XLA's buffers, and
what each ``vmap_method`` hands the function.

Each figure is an SVG written into the site's sources as ``_figures/<name>.svg``
(the pages show them with ``{figure}`` blocks), byte for byte the same on
every build: the fonts are drawn as paths from matplotlib's own DejaVu Sans,
and the file carries no date and no random ids. The numbers the pages quote
(``{{ name }}``: MyST's substitutions) and the speed table come from the same
data, so prose, table and charts cannot disagree.
"""

from __future__ import annotations

import io
import json
import math
import os
import pathlib
import tempfile
from collections.abc import Callable

# matplotlib writes a font cache on first import: somewhere writable, not the
# home folder (Bazel's sandbox may have none). In a Bazel test, the test's own
# temporary folder, which Bazel removes: the test runner (tests/run_pytest.py)
# exits without Python's teardown, where a temporary folder object would
# remove its folder. Elsewhere such an object, kept here, removes it at exit.
if "MPLCONFIGDIR" not in os.environ:
    if "TEST_TMPDIR" in os.environ:
        os.environ["MPLCONFIGDIR"] = os.path.join(os.environ["TEST_TMPDIR"], "matplotlib")
    else:
        _config = tempfile.TemporaryDirectory(prefix="xlabind-matplotlib-")
        os.environ["MPLCONFIGDIR"] = _config.name

import matplotlib
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

#: Series colours, the same on every chart (colour-blind safe: Okabe-Ito).
COLOURS = {
    "xlabind": "#0072B2",
    "jax": "#E69F00",
    "SciPy": "#009E73",
    "jnp gather": "#CC79A7",
    "float64": "#0072B2",
    "float32": "#D55E00",
}
STYLE = {
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "svg.fonttype": "path",
    "svg.hashsalt": "xlabind",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
}
#: The workloads the speed table and charts show (roofline.json's rows).
SPEED_GRID = 64
SPEED_DTYPE = "float64"


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    with matplotlib.rc_context(STYLE):
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    return buffer.getvalue()


def _figure(width: float, height: float) -> Figure:
    with matplotlib.rc_context(STYLE):
        return Figure(figsize=(width, height), layout="constrained")


# -- the data ------------------------------------------------------------------


def load(folder: pathlib.Path) -> dict:
    """docs/figure_data/'s files, by name without the suffix."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))}


def _rows(roofline: dict, op: str, kind: str, side: int = SPEED_GRID, dtype: str = SPEED_DTYPE):
    """roofline.json's rows of one op and kind, by order."""
    return {
        row["workload"]["order"]: row
        for row in roofline["roofline"]["rows"]
        if row["workload"]["op"] == op
        and row["workload"]["kind"] == kind
        and row["workload"]["side"] == side
        and row["workload"]["dtype"] == dtype
    }


def _ms(value: float) -> str:
    """A time as the tables print it: three significant digits."""
    if value >= 100:
        return f"{value:.0f} ms"
    if value >= 10:
        return f"{value:.1f} ms"
    return f"{value:.2f} ms"


def _times(value: float) -> str:
    return f"{value:.0f}×" if value >= 10 else f"{value:.1f}×"


def numbers(data: dict) -> dict[str, str]:
    """The values the pages quote, as MyST substitutions (``{{ name }}``)."""
    roofline = data["roofline"]
    values = _rows(roofline, "map_coordinates", "values")
    grid = _rows(roofline, "map_coordinates", "grid gradient")
    environment = roofline["environment"]
    out = {
        "speed_machine": (
            f"{environment['cpu_count']} cores ({environment.get('cpu', 'CPU model unknown')})"
        ),
        "speed_versions": f"jax {environment['jax']}, xlabind {environment['xlabind']}",
        "speed_points": f"2^{values[1]['workload']['points'].bit_length() - 1}",
        "speed_grid": f"{SPEED_GRID}³ {SPEED_DTYPE}",
        "speed_table": speed_table(data),
        **measuring_tables(data),
    }
    for order, row in values.items():
        out[f"order{order}_ms"] = _ms(row["ms"]["xlabind"])
        out[f"order{order}_bound"] = f"{100 * row['fraction_of_bound']:.0f}%"
    # Each baseline's time over xlabind's: order3_scipy_ratio, order1_grid_jax_ratio, ...
    for prefix, rows in (("", values), ("grid_", grid)):
        for order, row in rows.items():
            for name, theirs in row["ms"].items():
                if name != "xlabind":
                    key = f"order{order}_{prefix}{name.lower().replace(' ', '_')}_ratio"
                    out[key] = _times(theirs / row["ms"]["xlabind"])
    errors = data["spline_orders"]["accuracy"]["max_error_over_max_value"]
    out["accuracy_float64_worst"] = f"{max(errors['float64'].values()):.0e}"
    out["accuracy_float32_worst"] = f"{max(errors['float32'].values()):.0e}"
    return out


def speed_table(data: dict) -> str:
    """The interpolation guide's speed table (Markdown), from roofline.json."""
    roofline = data["roofline"]
    values = _rows(roofline, "map_coordinates", "values")
    grid = _rows(roofline, "map_coordinates", "grid gradient")
    prefilter = _rows(roofline, "spline_filter", "values")
    lines = [
        "| order | values | jax's | SciPy's | jax or SciPy / xlabind "
        "| gradient in the grid | prefilter (SciPy's) | of the machine's bound |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for order, row in sorted(values.items()):
        ms = row["ms"]
        others = {name: t for name, t in ms.items() if name in ("jax", "SciPy")}
        best = min(others.values()) if others else None
        filter_row = prefilter.get(order)
        lines.append(
            f"| {order} | {_ms(ms['xlabind'])} "
            f"| {_ms(ms['jax']) if 'jax' in ms else '—'} "
            f"| {_ms(ms['SciPy']) if 'SciPy' in ms else '—'} "
            f"| {_times(best / ms['xlabind']) if best else '—'} "
            f"| {_ms(grid[order]['ms']['xlabind'])} "
            + (
                f"| {_ms(filter_row['ms']['xlabind'])} ({_ms(filter_row['ms']['SciPy'])}) "
                if filter_row
                else "| — "
            )
            + f"| {100 * row['fraction_of_bound']:.0f}% |"
        )
    return "\n".join(lines)


def _markdown(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(map(str, row)) + " |" for row in rows])


def measuring_tables(data: dict) -> dict[str, str]:
    """The measuring page's current tables, each with the machine it came
    from: the roofline run's every row, and each device run recorded."""
    run = data["roofline"]
    environment = run["environment"]
    rows = []
    for row in run["roofline"]["rows"]:
        w, ms, bounds = row["workload"], row["ms"], row["bounds_ms"]
        others = ", ".join(f"{name} {_ms(t)}" for name, t in ms.items() if name != "xlabind")
        rows.append(
            [
                w["op"],
                w["kind"],
                w["order"],
                f"{w['side']}³ {w['dtype']}",
                _ms(ms["xlabind"]),
                others or "—",
                f"{_ms(bounds['bound'])} ({bounds['binding']})",
                f"{100 * row['fraction_of_bound']:.0f}%",
            ]
        )
    header = ["op", "kind", "order", "grid", "xlabind", "others", "bound", "of bound"]
    devices = []
    for name, run_data in sorted(data.items()):
        if name.startswith("device_"):
            machine = "; ".join(line for line in run_data["report"] if line.startswith("jax"))
            devices.append(f"**{run_data['platform']}**, {run_data['date']}: {machine}.")
            for table in run_data["tables"]:
                devices += [f"*{table['title']}*", _markdown(table["header"], table["rows"])]
    return {
        "roofline_machine": (
            f"{environment.get('cpu', 'CPU model unknown')}, {environment['cpu_count']} cores; "
            f"Python {environment['python']}, jax {environment['jax']}, xlabind "
            f"{environment['xlabind']}; {run['rounds']} rounds, {run['seconds']:.0f} s"
        ),
        "roofline_rows": _markdown(header, rows),
        "device_runs": "\n\n".join(devices)
        or "No device run is recorded in `docs/figure_data/` yet.",
    }


# -- the charts ----------------------------------------------------------------


def spline_orders(data: dict) -> str:
    """Orders 0-5 on the sampled signal, one panel each."""
    orders = data["spline_orders"]
    samples = orders["samples"]
    figure = _figure(6.4, 5.6)
    axes = figure.subplots(3, 2, sharex=True, sharey=True)
    for order, ax in zip(range(6), axes.flat):
        ax.plot(orders["at"], orders["curves"][str(order)], color=COLOURS["xlabind"], lw=1.6)
        ax.plot(range(len(samples)), samples, "o", color="black", ms=4)
        ax.set_title(
            {0: "order 0 (nearest)", 1: "order 1 (linear)"}.get(order, f"order {order} (B-spline)"),
            fontsize=10,
        )
        ax.axhline(0.0, color="#bbbbbb", lw=0.6, zorder=0)
    for ax in axes[-1]:
        ax.set_xlabel("coordinate")
    figure.suptitle(
        f"map_coordinates of a sampled signal (dots), mode {orders['mode']!r}", fontsize=11
    )
    return _svg(figure)


def spline_accuracy(data: dict) -> str:
    """Each order's largest distance from SciPy's result, float64 and float32."""
    accuracy = data["spline_orders"]["accuracy"]
    errors = accuracy["max_error_over_max_value"]
    figure = _figure(6.4, 3.4)
    ax = figure.subplots()
    floor = 1e-18  # where an exact result (0) is drawn
    width = 0.38
    for index, dtype in enumerate(("float64", "float32")):
        heights = [max(errors[dtype][str(order)], floor) for order in range(6)]
        positions = [order + (index - 0.5) * width for order in range(6)]
        bars = ax.bar(positions, heights, width, color=COLOURS[dtype], label=dtype)
        for bar, value in zip(bars, (errors[dtype][str(order)] for order in range(6))):
            ax.annotate(
                "exact" if value == 0 else f"{value:.0e}",
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=7,
                xytext=(0, 2),
                textcoords="offset points",
            )
    ax.set_yscale("log")
    ax.set_ylim(floor, 1e-3)
    ax.set_xticks(range(6), [str(order) for order in range(6)])
    ax.set_xlabel("order")
    ax.set_ylabel("largest difference / largest value")
    ax.set_title(
        f"Distance from SciPy's float64 result ({accuracy['points']:,} points, "
        f"{accuracy['side']}³ grid)",
        fontsize=10,
    )
    ax.legend(frameon=False, loc="upper left")
    return _svg(figure)


def interpolation_speed(data: dict) -> str:
    """Time per call of the values and the grid gradient, by order, against jax and SciPy."""
    roofline = data["roofline"]
    figure = _figure(6.4, 3.6)
    axes = figure.subplots(1, 2, sharey=True)
    for ax, kind in zip(axes, ("values", "grid gradient")):
        rows = _rows(roofline, "map_coordinates", kind)
        names = [n for n in ("xlabind", "jax", "SciPy") if any(n in r["ms"] for r in rows.values())]
        width = 0.8 / len(names)
        for index, name in enumerate(names):
            orders = [order for order, row in sorted(rows.items()) if name in row["ms"]]
            ax.bar(
                [order + (index - (len(names) - 1) / 2) * width for order in orders],
                [rows[order]["ms"][name] for order in orders],
                width,
                color=COLOURS[name],
                label=name,
            )
        ax.set_yscale("log")
        ax.set_xticks(range(6), [str(order) for order in range(6)])
        ax.set_xlabel("order")
        ax.set_title(kind, fontsize=10)
        ax.legend(frameon=False, fontsize=8, loc="upper left")
    axes[0].set_ylabel("ms per call (log scale)")
    points = next(iter(_rows(roofline, "map_coordinates", "values").values()))["workload"]
    figure.suptitle(
        f"map_coordinates, {points['points']:,} points in a {SPEED_GRID}³ {SPEED_DTYPE} grid "
        f"({roofline['environment']['cpu_count']} cores)",
        fontsize=10,
    )
    return _svg(figure)


def interpolation_roofline(data: dict) -> str:
    """Each workload's time against the machine's bound for it, by order."""
    roofline = data["roofline"]
    figure = _figure(6.4, 5.2)
    axes = figure.subplots(2, 1, sharex=True, sharey=True)
    kinds = ("values", "grid gradient", "coordinate gradient")
    kind_colours = ("#0072B2", "#E69F00", "#009E73")
    for ax, side in zip(axes, (64, 256)):
        width = 0.8 / len(kinds)
        for index, (kind, colour) in enumerate(zip(kinds, kind_colours)):
            rows = _rows(roofline, "map_coordinates", kind, side=side)
            orders = sorted(rows)
            ax.bar(
                [order + (index - 1) * width for order in orders],
                [100 * rows[order]["fraction_of_bound"] for order in orders],
                width,
                color=colour,
                label=kind,
            )
        ax.set_title(f"{side}³ {SPEED_DTYPE} grid", fontsize=10)
        ax.set_ylabel("% of the bound")
        ax.axhline(100, color="#888888", lw=0.8, ls="--")
    axes[0].legend(frameon=False, fontsize=8, ncols=3, loc="upper right")
    axes[-1].set_xticks(range(6), [str(order) for order in range(6)])
    axes[-1].set_xlabel("order")
    highest = max(
        100 * row["fraction_of_bound"]
        for side in (64, 256)
        for kind in kinds
        for row in _rows(roofline, "map_coordinates", kind, side=side).values()
    )
    axes[0].set_ylim(0, max(120, 10 * math.ceil(highest / 10) + 20))
    figure.suptitle(
        "map_coordinates against the machine's limit (100%: the bound's time)", fontsize=10
    )
    return _svg(figure)


# -- the diagrams --------------------------------------------------------------


def _diagram(width: float, height: float):
    """A figure and axes in inches (x right, y up), for boxes and arrows."""
    with matplotlib.rc_context(STYLE):
        figure = Figure(figsize=(width, height))
    ax = figure.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    return figure, ax


def _box(ax, x, y, w, h, title, lines=(), colour="#E8F1FA", edge="#0072B2"):
    """A rounded box, (x, y) its lower left corner: a bold title, then lines."""
    ax.add_patch(
        FancyBboxPatch(
            (x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.1", fc=colour, ec=edge, lw=1.2
        )
    )
    ax.text(x + 0.15, y + h - 0.12, title, va="top", ha="left", fontsize=10, weight="bold")
    for index, line in enumerate(lines):
        ax.text(x + 0.15, y + h - 0.45 - 0.22 * index, line, va="top", ha="left", fontsize=8.5)


def _arrow(ax, start, end, text="", colour="#444444"):
    ax.add_patch(
        FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color=colour, lw=1.2)
    )
    if text:
        ax.text(
            (start[0] + end[0]) / 2 + 0.1,
            (start[1] + end[1]) / 2,
            text,
            va="center",
            ha="left",
            fontsize=8,
            color=colour,
        )


def call_path(data: dict) -> str:
    """A bound function's call, from jax.jit to the user's Python and back."""
    figure, ax = _diagram(6.4, 5.2)
    steps = [
        (
            "jax.jit(f)(x)",
            [
                "f calls op = xlabind.callback(fn, result_shape);",
                "jax traces f: op is one primitive in the program",
            ],
        ),
        (
            "XLA's compiled program",
            [
                "the op is a custom call to xlabind's FFI handler;",
                "XLA owns every buffer: arguments, results, scratch",
            ],
        ),
        (
            "xlabind's handler (C++)",
            [
                "runs on the thread XLA runs the call on;",
                "takes the GIL, wraps XLA's buffers: no copy",
            ],
        ),
    ]
    top, height, gap = 5.05, 0.9, 0.35
    for index, (title, lines) in enumerate(steps):
        y = top - height - index * (height + gap)
        colours = {"colour": "#FDF1E0", "edge": "#E69F00"} if index == 2 else {}
        _box(ax, 0.2, y, 5.4, height, title, lines, **colours)
        if index:
            _arrow(
                ax, (1.5, y + height + gap), (1.5, y + height), ("lowered", "runs it")[index - 1]
            )
    bottom = top - 3 * height - 2 * gap - gap
    user = {"colour": "#E6F5EF", "edge": "#009E73"}
    _box(
        ax,
        0.2,
        bottom - 1.1,
        2.6,
        1.1,
        "CPU: fn(x, out)",
        ["NumPy views of XLA's buffers:", "inputs read-only,", "results writable"],
        **user,
    )
    _box(
        ax,
        3.0,
        bottom - 1.1,
        2.6,
        1.1,
        "CUDA: fn(x, out)",
        [
            "device arrays (CuPy, or torch",
            "through DLPack) of the buffers,",
            "XLA's stream current",
        ],
        **user,
    )
    _arrow(ax, (1.5, bottom + gap), (1.5, bottom))
    _arrow(ax, (4.3, bottom + gap), (4.3, bottom))
    # Back up: the results are already in XLA's buffers; only a status returns.
    _arrow(ax, (5.8, bottom - 0.55), (5.8, top - height / 2), colour="#0072B2")
    ax.text(
        6.12,
        (bottom - 0.55 + top - height / 2) / 2,
        "results are in XLA's buffers already:\nnothing is copied back; an exception\n"
        "returns as the call's error",
        rotation=90,
        ha="center",
        va="center",
        fontsize=8,
        color="#0072B2",
    )
    return _svg(figure)


def _cells(ax, x, y, rows, columns, colours, label=""):
    """An array drawn as cells below (x, y); `colours` gives each row's colour.
    Returns the height it took, label included."""
    size = 0.2
    for row in range(rows):
        for column in range(columns):
            ax.add_patch(
                Rectangle(
                    (x + (size + 0.02) * column, y - (size + 0.02) * (row + 1)),
                    size,
                    size,
                    fc=colours[row % len(colours)],
                    ec="white",
                    lw=0.5,
                )
            )
    if label:
        ax.text(x, y - (size + 0.02) * rows - 0.06, label, va="top", ha="left", fontsize=8)
    return (size + 0.02) * rows + 0.3


def vmap_methods(data: dict) -> str:
    """What jax.vmap(op, in_axes=(0, None))(x, k) hands the function, per vmap_method."""
    batch = ("#0072B2", "#E69F00", "#009E73", "#CC79A7")
    grey = ("#999999",)
    figure, ax = _diagram(6.4, 6.8)
    ax.text(
        0.2,
        6.65,
        "jax.vmap(op, in_axes=(0, None))(x, k)",
        va="top",
        fontsize=10,
        family="DejaVu Sans Mono",
    )
    ax.text(
        0.2,
        6.35,
        "x: (4, 3), batched (a colour per batch element);  k: (2,), not batched",
        va="top",
        fontsize=8.5,
    )
    methods = [
        ("sequential", "4 calls, one per batch element (jax.lax.map)"),
        ("expand_dims", "1 call; unbatched arguments get an axis of size 1"),
        ("broadcast_all", "1 call; every argument broadcast to the batch"),
        ("native", "1 call on the arrays as vmap laid them out"),
    ]
    y = 5.9
    for method, what in methods:
        ax.text(
            0.2, y, f'"{method}"', va="top", fontsize=10, weight="bold", family="DejaVu Sans Mono"
        )
        ax.text(2.1, y - 0.02, what, va="top", fontsize=8.5)
        y -= 0.3
        if method == "sequential":
            for call in range(4):
                x0 = 0.2 + call * 1.55
                used = _cells(ax, x0, y, 1, 3, (batch[call],), f"x[{call}]: (3,)")
                _cells(ax, x0 + 0.8, y, 1, 2, grey, "k: (2,)")
        else:
            used = _cells(ax, 0.2, y, 4, 3, batch, "x: (4, 3)")
            k_rows, k_label = {
                "expand_dims": (1, "k: (1, 2)"),
                "broadcast_all": (4, "k: (4, 2), k repeated"),
                "native": (1, "k: (2,)"),
            }[method]
            _cells(ax, 1.3, y, k_rows, 2, grey, k_label)
            if method == "native":
                ax.text(
                    3.0,
                    y - 0.05,
                    "batch_axes=((0,), (None,))",
                    va="top",
                    fontsize=8.5,
                    family="DejaVu Sans Mono",
                )
                ax.text(
                    3.0,
                    y - 0.35,
                    "one entry per argument, one axis per\nvmap level (None: not batched there)",
                    va="top",
                    fontsize=8,
                )
        y -= used + 0.15
    return _svg(figure)


#: Every figure by its file's name (_figures/<name>.svg).
FIGURES: dict[str, Callable[[dict], str]] = {
    "spline_orders": spline_orders,
    "spline_accuracy": spline_accuracy,
    "interpolation_speed": interpolation_speed,
    "interpolation_roofline": interpolation_roofline,
    "call_path": call_path,
    "vmap_methods": vmap_methods,
}


def write(folder: pathlib.Path, data: dict) -> None:
    """Writes every figure into folder (the site's _figures/) and the quoted
    numbers as numbers.json, which conf.py reads."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, draw in FIGURES.items():
        (folder / f"{name}.svg").write_text(draw(data))
    (folder / "numbers.json").write_text(json.dumps(numbers(data), indent=1, sort_keys=True))
