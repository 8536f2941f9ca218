"""The interpolation guide's figure data that only xlabind's compiled ops can
compute: map_coordinates of orders 0 to 5 on a sampled signal, and each
order's distance from SciPy's. The site draws its figures from the file this
writes (docs/figure_data/spline_orders.json), so that building the site needs
no compiled module; tests/docs/test_figures.py computes it again and holds the
file to the result.

    tools/bazel run //docs/sphinx:snapshot_figure_data -- --write
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

import jax
import numpy as np
import scipy.ndimage

ORDERS = range(6)
MODE = "mirror"
#: The signal the orders are drawn on: a step, a bump and a dip, so that the
#: higher orders' overshoot shows.
SAMPLES = [0.0, 0.1, 0.0, 1.0, 1.0, 0.9, 0.3, 0.5, -0.2, 0.0]
#: Where the curves are evaluated: 20 points a sample spacing.
STEPS_PER_SAMPLE = 20
#: The accuracy problem: a random 24^3 grid, points also outside it.
SIDE = 24
POINTS = 20_000
SEED = 20261204
#: Values are kept to this many significant digits (the file stays small;
#: the test compares to well within them).
DIGITS = 12
DTYPES = ("float64", "float32")


def _round(values: np.ndarray) -> list[float]:
    return [float(f"{v:.{DIGITS}g}") for v in np.asarray(values, np.float64)]


def compute() -> dict:
    """The figure data, computed with xlabind.ops and SciPy (in float64: jax's
    x64 mode is on for the computation and restored after it)."""
    was = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        return _compute()
    finally:
        jax.config.update("jax_enable_x64", was)


def _compute() -> dict:
    from xlabind.ops import map_coordinates

    samples = np.asarray(SAMPLES)
    at = np.linspace(0.0, len(SAMPLES) - 1.0, (len(SAMPLES) - 1) * STEPS_PER_SAMPLE + 1)
    curves = {str(order): _round(map_coordinates(samples, [at], order, MODE)) for order in ORDERS}
    rng = np.random.default_rng(SEED)
    grid = rng.standard_normal((SIDE,) * 3)
    coordinates = rng.uniform(-3.0, SIDE + 2.0, (3, POINTS))
    errors: dict[str, dict[str, float]] = {dtype: {} for dtype in DTYPES}
    for order in ORDERS:
        theirs = scipy.ndimage.map_coordinates(grid, coordinates, order=order, mode=MODE)
        scale = float(np.max(np.abs(theirs)))
        for dtype in DTYPES:
            ours = map_coordinates(grid.astype(dtype), list(coordinates.astype(dtype)), order, MODE)
            gap = float(np.max(np.abs(np.asarray(ours, np.float64) - theirs))) / scale
            errors[dtype][str(order)] = float(f"{gap:.3g}")
    return {
        "mode": MODE,
        "samples": SAMPLES,
        "at": _round(at),
        "curves": curves,
        "accuracy": {
            "side": SIDE,
            "points": POINTS,
            "reference": f"scipy.ndimage.map_coordinates {scipy.__version__}, float64",
            "max_error_over_max_value": errors,
        },
    }


def snapshot_path() -> pathlib.Path:
    """docs/figure_data/spline_orders.json in the checkout: the one `bazel run`
    was started from, else this file's (run as a plain script)."""
    root = (
        os.environ.get("BUILD_WORKSPACE_DIRECTORY") or pathlib.Path(__file__).resolve().parents[2]
    )
    return pathlib.Path(root) / "docs" / "figure_data" / "spline_orders.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write the file anew")
    args = parser.parse_args(argv)
    data = compute()
    if not args.write:
        json.dump(data, sys.stdout, indent=1)
        return 0
    path = snapshot_path()
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
