"""The centred B-spline of degree 0 to 5 (ffi/ops/bspline/bspline.h's
BSpline), for both ops' TPU formulations: map_coordinates' weights and
spline_filter's collocation matrices."""

from __future__ import annotations

import jax.numpy as jnp


def bspline(k: int, t, xp=jnp):
    """The centred B-spline of degree k at t (bspline.h's BSpline), in jax or
    NumPy (`xp`)."""
    u = xp.abs(t)
    if k == 0:
        return xp.where(u < 0.5, 1.0, 0.0).astype(t.dtype)
    if k == 1:
        return xp.where(u < 1, 1 - u, 0.0)
    if k == 2:
        return xp.where(u < 0.5, 0.75 - u * u, xp.where(u < 1.5, (1.5 - u) ** 2 / 2, 0.0))
    if k == 3:
        return xp.where(u < 1, 2 / 3 + u * u * (u / 2 - 1), xp.where(u < 2, (2 - u) ** 3 / 6, 0.0))
    u2 = u * u
    if k == 4:
        return xp.where(
            u < 0.5,
            115 / 192 + u2 * (u2 / 4 - 5 / 8),
            xp.where(
                u < 1.5,
                (55 + u * (20 + u * (-120 + u * (80 - 16 * u)))) / 96,
                xp.where(u < 2.5, (2.5 - u) ** 4 / 24, 0.0),
            ),
        )
    return xp.where(
        u < 1,
        11 / 20 + u2 * (-0.5 + u2 * (0.25 - u / 12)),
        xp.where(
            u < 2,
            17 / 40 + u * (5 / 8 + u * (-7 / 4 + u * (5 / 4 + u * (-3 / 8 + u / 24)))),
            xp.where(u < 3, (3 - u) ** 5 / 120, 0.0),
        ),
    )
