"""xlabind.ops.spline_filter on TPUs: the native kernels' targets written in
JAX, which a TPU program lowers in their place (XLA on a TPU runs no native
handlers). Along each axis the prefilter is a dense matrix, the exact
inverse of the B-spline's collocation matrix (what the recursions of
ffi/ops/spline_filter/line_filter.h compute), applied with full float32
precision. The op's targets carry these as their TPU formulation (op.py).
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
from jax import lax

from xlabind.ops.bspline import bspline
from xlabind.ops.modes import Boundary, mapped_nodes

#: The dense matrices' longest axis: the most samples an axis may have.
MAX_FILTER_LENGTH = 4096


@functools.cache
def filter_matrix(n: int, order: int, boundary: int) -> np.ndarray:
    """(n, n), float64: samples -> the coefficients of the interpolating
    B-spline of degree `order` whose coefficients continue past the ends by
    `boundary` (what line_filter.h's recursions compute)."""
    if n == 1:
        return np.ones((1, 1))
    reach = (order + 1) // 2 + 1
    collocation = np.zeros((n, n))
    mode = Boundary(boundary).mode
    for i in range(n):
        m = np.arange(i - reach, i + reach + 1)
        weights = bspline(order, (i - m).astype(np.float64), xp=np)
        j, _ = mapped_nodes(m, n, mode)
        np.add.at(collocation[i], j, weights)
    return np.linalg.inv(collocation)


def _filtered(x, order: int, boundary: int, axes, transpose: bool):
    for axis in reversed(axes) if transpose else axes:
        n = x.shape[axis]
        if n > MAX_FILTER_LENGTH:
            raise NotImplementedError(
                f"xlabind.ops.spline_filter on a TPU filters axes of up to "
                f"{MAX_FILTER_LENGTH} samples; axis {axis} has {n}"
            )
        dense = filter_matrix(n, order, boundary)
        matrix = jnp.asarray(dense if transpose else dense.T, x.dtype)
        x = jnp.moveaxis(
            jnp.matmul(jnp.moveaxis(x, axis, -1), matrix, precision=lax.Precision.HIGHEST),
            -1,
            axis,
        )
    return x


def spline_filter(x, *, order, boundary, axes, **_):
    """xlabind_spline_filter: the prefilter along `axes` (counted from the end)."""
    return [_filtered(x, int(order), int(boundary), tuple(axes), transpose=False)]


def spline_filter_transpose(x, *, order, boundary, axes, **_):
    """xlabind_spline_filter_transpose: its transpose."""
    return [_filtered(x, int(order), int(boundary), tuple(axes), transpose=True)]
