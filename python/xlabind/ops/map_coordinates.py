"""`xlabind.ops.map_coordinates`: jax.scipy.ndimage.map_coordinates as native
kernels (ffi/ops/map_coordinates: threads on the CPU, CUDA on GPUs), bound
with xlabind's API for native targets:

* the interpolation is linear in the grid: ``xlabind.linear`` of the native
  gather, with the native scatter-add (atomics on the GPU) as its transpose;
* in the coordinates it is differentiable: ``xlabind.nonlinear`` with a JVP
  rule written in JAX (``xlabind.traceable``) from the same kernel with its
  weights differentiated, so every derivative in either argument works;
* vmap calls the kernels once on the whole batch (their leading dimensions).
"""

from __future__ import annotations

import functools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from xlabind.linear import linear
from xlabind.native_implementation import ffi_target
from xlabind.nonlinear import nonlinear, traceable

_MODES = {"constant": 0, "nearest": 1, "wrap": 2, "mirror": 3, "reflect": 4}
_GATHER = ffi_target("xlabind_map_coordinates", platforms=("cpu", "cuda"))
_SCATTER = ffi_target("xlabind_map_coordinates_transpose", platforms=("cpu", "cuda"))


@functools.lru_cache(maxsize=None)
def _bound(ndim: int):
    """(grid -> values linear, (grid, coordinates...) -> values) for an ndim-D grid.
    The kernels take the grid and one array of coordinates per axis, each
    (*batch, points); leading batch dimensions (vmap) broadcast."""

    def values(grid, *coords, **_):
        batch = np.broadcast_shapes(grid.shape[:grid.ndim - ndim], coords[0].shape[:-1])
        return jax.ShapeDtypeStruct((*batch, coords[0].shape[-1]), grid.dtype)

    interpolate = linear(_GATHER, _SCATTER, values, nondiff_argnums=range(1, ndim + 1),
                         vmap_method="expand_dims", name="map_coordinates (linear in the grid)")

    def jvp(grid, *args, order, mode, derivative):
        coords, t_grid, t_coords = args[:ndim], args[ndim], args[ndim + 1:]
        terms = []
        if t_grid is not None:
            terms.append(interpolate(t_grid, *coords, order=order, mode=mode,
                                     derivative=derivative))
        for axis, t in enumerate(t_coords):
            if t is None or order == 0 or derivative[axis]:
                continue  # nearest values and linear slopes do not move along an axis
            steeper = tuple(d + (a == axis) for a, d in enumerate(derivative))
            terms.append(interpolated(grid, *coords, order=order, mode=mode,
                                      derivative=steeper) * t)
        if not terms:
            return jnp.zeros(values(grid, *coords).shape, grid.dtype)
        return sum(terms[1:], terms[0])

    interpolated = nonlinear(_GATHER, values, jvp=traceable(jvp), vjp=None,
                             vmap_method="expand_dims", name="map_coordinates")
    return interpolate, interpolated


def map_coordinates(input, coordinates: Sequence, order: int, mode: str = "constant",
                    cval=0.0) -> jax.Array:
    """Interpolates ``input`` at ``coordinates``, like
    :func:`jax.scipy.ndimage.map_coordinates`, with native kernels.

    Args:
      input: the N-dimensional grid (1 to 8 dimensions; float32 or float64).
      coordinates: N arrays (broadcast together), the fractional grid indices
        of the points, one array per grid dimension.
      order: 0 (nearest) or 1 (linear).
      mode: ``"constant"``, ``"nearest"``, ``"wrap"``, ``"mirror"`` or
        ``"reflect"``, as in JAX.
      cval: the value outside the grid in ``"constant"`` mode.

    Returns:
      The interpolated values, shaped like the (broadcast) coordinates, of
      ``input``'s dtype. Differentiable in ``input`` and ``coordinates``;
      vmap runs the kernel once on the whole batch. Other dtypes (integers,
      complex) and grids beyond 8 dimensions are handed to jax's own
      implementation.

    Example:
      >>> import jax.numpy as jnp
      >>> from xlabind.ops import map_coordinates
      >>> grid = jnp.arange(12.0).reshape(3, 4)
      >>> map_coordinates(grid, [jnp.array([0.5, 2.0]), jnp.array([1.0, 3.5])], order=1)
      Array([3. , 5.5], dtype=float32)
    """
    grid = jnp.asarray(input)
    coordinates = [jnp.asarray(c) for c in coordinates]
    if len(coordinates) != grid.ndim:
        raise ValueError(f"xlabind.ops.map_coordinates: coordinates must be a sequence of "
                         f"length input.ndim, but {len(coordinates)} != {grid.ndim}")
    if order not in (0, 1):
        raise NotImplementedError(f"xlabind.ops.map_coordinates: order must be 0 or 1, got "
                                  f"{order!r}")
    if mode not in _MODES:
        raise NotImplementedError(f"xlabind.ops.map_coordinates: mode must be one of "
                                  f"{sorted(_MODES)}, got {mode!r}")
    if grid.dtype not in (jnp.float32, jnp.float64) or not 1 <= grid.ndim <= 8:
        return jax.scipy.ndimage.map_coordinates(grid, coordinates, order, mode, cval)
    coordinates = jnp.broadcast_arrays(*coordinates)
    shape = coordinates[0].shape
    coords = [c.astype(grid.dtype).reshape(-1) for c in coordinates]
    _, interpolated = _bound(grid.ndim)
    flat = dict(order=order, mode=_MODES[mode], derivative=(0,) * grid.ndim)
    values = interpolated(grid, *coords, **flat)
    if mode == "constant" and not (isinstance(cval, (int, float)) and cval == 0):
        # Points outside the grid take cval: their weights are what the grid's
        # inside leaves of 1.
        outside = 1 - interpolated(jnp.ones_like(grid), *coords, **flat)
        values = values + jnp.asarray(cval, grid.dtype) * outside
    return values.reshape(shape)
