"""The values xlabind.ops.map_coordinates promises on every input (the
interpolation guide, "Every coordinate has a value"), for the CPU test and its GPU twin;
the modes, and SciPy's names for them, for every map_coordinates test."""

import math

import numpy as np

MODES = ["constant", "nearest", "wrap", "mirror", "reflect"]
# SciPy's names for jax's reading of the modes (the splines' reference).
SCIPY_MODE = {
    "constant": "grid-constant",
    "nearest": "nearest",
    "wrap": "grid-wrap",
    "mirror": "mirror",
    "reflect": "reflect",
}
GRID = np.arange(10.0, 15.0)  # 5 nodes: 10, 11, 12, 13, 14
CVAL = -1.0

# Coordinates where jax's int32 index arithmetic does not overflow (reflect
# doubles the index and adds the size: |c| < 2^30 - size), with rounding ties
# and values one ulp off them.
FINITE = [
    2.4999999999999996,
    0.49999999999999994,
    -0.49999999999999994,
    2.5,
    -2.5,
    3.7,
    -7.3,
    1e9 + 0.25,
    -(2.0**29) + 2.5,
    2.0**29 - 2.5,
    0.0,
    4.0,
    4.5,
    -0.5,
    5.0,
    1234567.5,
]

# The table for the rest, on GRID (orders 0 and 1 agree on these integers).
EXTREME = [math.nan, math.inf, -math.inf, 1e30, -1e30, 2.0**31 + 3, 9.3e18, 3 * 2.0**62]


def _exact(mode, c):
    """The node an integral coordinate `c` reads, by exact integer arithmetic."""
    i, n = int(c), len(GRID)
    if mode == "wrap":
        return i % n
    if mode == "mirror":
        r = (i + n - 1) % (2 * (n - 1)) - (n - 1)
        return abs(r)
    # reflect: period 2n, as the mirror of 2i + 1 over 2n + 1 nodes
    j = i % (2 * n)
    return j if j < n else 2 * n - 1 - j


def expected(mode, c):
    if math.isnan(c):
        return math.nan
    if math.isinf(c):
        return {"constant": CVAL, "nearest": GRID[-1] if c > 0 else GRID[0]}.get(mode, math.nan)
    if mode == "constant":
        return CVAL
    if mode == "nearest":
        return GRID[-1] if c > 0 else GRID[0]
    return GRID[_exact(mode, c)]
