"""How the ops' kernels continue a signal past its ends: the two enums their
attributes take, defined once for every Python module of xlabind.ops and
spelled as the kernels' headers spell them (kConstant is CONSTANT;
tests/native/test_op_enums.py holds the names and values equal).

Mode, map_coordinates' `mode` (ffi/ops/map_coordinates/interpolation.h),
read as jax reads its mode names: CONSTANT and WRAP are SciPy's
"grid-constant" and "grid-wrap", MIRROR is whole-sample symmetric (period
2n - 2), REFLECT half-sample symmetric (period 2n).

Boundary, spline_filter's `boundary` (ffi/ops/spline_filter/line_filter.h):
the extension the prefilter's recursions start from, one of three of the
modes, numbered apart (the kernels' attribute values, which exported
programs carry, stay as they are).
"""

from __future__ import annotations

import enum

import numpy as np


class Mode(enum.IntEnum):
    """interpolation.h's Mode: how map_coordinates reads nodes outside the grid."""

    CONSTANT = 0
    NEAREST = 1
    WRAP = 2
    MIRROR = 3
    REFLECT = 4


class Boundary(enum.IntEnum):
    """line_filter.h's Boundary: how spline_filter's lines continue past their ends."""

    MIRROR = 0
    REFLECT = 1
    WRAP = 2

    @property
    def mode(self) -> Mode:
        """The interpolation mode that continues a line as this boundary does."""
        return Mode[self.name]


def mapped_nodes(j: np.ndarray, n: int, mode: int) -> tuple[np.ndarray, np.ndarray]:
    """Node indices `j` (any integers) of an axis of `n` nodes mapped into
    [0, n) by `mode`, and whether each is inside (CONSTANT leaves the
    outside out)."""
    inside = (j >= 0) & (j < n)
    if mode == Mode.CONSTANT:
        return np.where(inside, j, 0), inside
    if mode == Mode.NEAREST or n == 1:
        return np.clip(j, 0, n - 1), np.ones_like(inside)
    if mode == Mode.WRAP:
        return np.mod(j, n), np.ones_like(inside)
    if mode == Mode.MIRROR:
        m = np.mod(j, 2 * n - 2)
        return np.where(m <= n - 1, m, 2 * n - 2 - m), np.ones_like(inside)
    m = np.mod(j, 2 * n)
    return np.where(m < n, m, 2 * n - 1 - m), np.ones_like(inside)
