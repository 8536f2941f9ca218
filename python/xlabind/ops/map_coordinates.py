"""`xlabind.ops.map_coordinates`: jax.scipy.ndimage.map_coordinates as native
kernels (ffi/ops/map_coordinates: threads on the CPU, CUDA on GPUs), bound
with xlabind's API for native targets:

* the interpolation is linear in the grid: ``xlabind.linear`` of the native
  gather, with the native scatter-add (atomics on the GPU) as its transpose;
* in the coordinates it is differentiable: ``xlabind.nonlinear`` with a JVP
  rule written in JAX (``xlabind.traceable``) from the same kernel with its
  weights differentiated, so every derivative in either argument works;
* vmap calls the kernels once on the whole batch (their leading dimensions);
* under a sharded jit the points are split across devices (each device
  interpolates its own points; no gather), and the grid's gradient, a sum
  over points, is each device's scatter-add of its points summed across
  devices (the transpose of the independent points is a summed factor).
"""

from __future__ import annotations

import functools
import operator
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


#: Whether the kernels declare their sharding rule (always, but for
#: tools/benchmark.py, which compares with running once per program).
_SHARDED = True


@functools.lru_cache(maxsize=None)
def _bound(ndim: int, sharded: bool = True):
    """(grid -> values linear, (grid, coordinates...) -> values) for an ndim-D grid.
    The kernels take the grid and one array of coordinates per axis, each
    (*batch, points); leading batch dimensions (vmap) broadcast."""

    def values(grid, *coords, **_):
        batch = np.broadcast_shapes(grid.shape[:grid.ndim - ndim], coords[0].shape[:-1])
        return jax.ShapeDtypeStruct((*batch, coords[0].shape[-1]), grid.dtype)

    def rule(grid, *coords, **_):
        """The points and the batch are independent; the grid stays whole on
        every device. A batch dimension of size 1 that broadcasts is its own."""
        batch = values(grid, *coords).shape[:-1]
        ones = iter(range(grid.ndim + sum(c.ndim for c in coords)))

        def batched(lead):
            start = len(batch) - len(lead)
            return [f"b{start + k}" if d == batch[start + k] else f"one{next(ones)}"
                    for k, d in enumerate(lead)]

        grid_factors = batched(grid.shape[:grid.ndim - ndim]) + [f"g{k}" for k in range(ndim)]
        operands = [grid_factors] + [batched(c.shape[:-1]) + ["p"] for c in coords]
        result = [f"b{k}" for k in range(len(batch))] + ["p"]
        return (", ".join(" ".join(f) or "()" for f in operands) + " -> "
                + (" ".join(result) or "()"))

    interpolate = linear(_GATHER, _SCATTER, values, nondiff_argnums=range(1, ndim + 1),
                         vmap_method="expand_dims", sharding_rule=rule if sharded else None,
                         name="map_coordinates (linear in the grid)")

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
                             vmap_method="expand_dims", sharding_rule=rule if sharded else None,
                             name="map_coordinates")
    # The kernels read every coordinate array with the same batch layout: under
    # vmap a coordinate array that is not batched is broadcast like the others
    # (derived calls, the scatter among them, inherit the pairs).
    coordinate_pairs = tuple((1, k) for k in range(2, ndim + 1)) + tuple(
        (k, 1) for k in range(2, ndim + 1))
    for op in (interpolate, interpolated):
        op.definition.aligned_pairs = coordinate_pairs
    return interpolate, interpolated


def _checked_order(order) -> int:
    """`order` as the int jax takes it for: integer-valued numbers (1, 1.0, True,
    numpy integers) compare equal to 0 or 1 in jax's own check."""
    try:
        value = operator.index(order)
    except TypeError:
        integral = isinstance(order, (float, np.floating)) and float(order).is_integer()
        value = int(order) if integral else None
    if value is None:
        raise ValueError(f"xlabind.ops.map_coordinates: order must be an integer (0 or 1), got "
                         f"{order!r} of type {type(order).__name__}")
    if value not in (0, 1):
        raise NotImplementedError(f"xlabind.ops.map_coordinates: order must be 0 or 1, got "
                                  f"{order!r}")
    return value


def map_coordinates(input, coordinates: Sequence, order: int, mode: str = "constant",
                    cval=0.0) -> jax.Array:
    """Interpolates ``input`` at ``coordinates``, like
    :func:`jax.scipy.ndimage.map_coordinates`, with native kernels.

    Args:
      input: the N-dimensional grid (1 to 8 dimensions; float32 or float64).
      coordinates: N arrays (broadcast together), the fractional grid indices
        of the points, one array per grid dimension.
      order: 0 (nearest) or 1 (linear); an integer-valued number, as jax
        accepts it (``1.0`` and ``True`` are 1).
      mode: ``"constant"``, ``"nearest"``, ``"wrap"``, ``"mirror"`` or
        ``"reflect"``, as in JAX.
      cval: the value outside the grid in ``"constant"`` mode.

    Returns:
      The interpolated values, shaped like the (broadcast) coordinates, of
      ``input``'s dtype. Differentiable in ``input`` and ``coordinates``;
      vmap runs the kernel once on the whole batch. Every coordinate has a
      value: NaN gives NaN, infinities and coordinates too large for jax's
      int32 indices follow the table in the README ("map_coordinates on every
      input"). A grid with an empty dimension gives ``cval`` in constant mode
      and is an error in the others (there is nothing to read). Other dtypes
      (integers, complex) and grids beyond 8 dimensions are handed to jax's
      own implementation.

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
    order = _checked_order(order)
    if mode not in _MODES:
        raise NotImplementedError(f"xlabind.ops.map_coordinates: mode must be one of "
                                  f"{sorted(_MODES)}, got {mode!r}")
    if grid.dtype not in (jnp.float32, jnp.float64) or not 1 <= grid.ndim <= 8:
        return jax.scipy.ndimage.map_coordinates(grid, coordinates, order, mode, cval)
    coordinates = jnp.broadcast_arrays(*coordinates)
    shape = coordinates[0].shape
    if grid.size == 0:
        if mode != "constant":
            raise ValueError(f"xlabind.ops.map_coordinates: mode {mode!r} has nothing to read "
                             f"in a grid with an empty dimension (shape {grid.shape}); only "
                             f"mode='constant' (every point is outside: cval) has values")
        return jnp.full(shape, cval, grid.dtype)
    # jax computes the weights in the coordinates' precision: float64
    # coordinates on a float32 grid run in float64, cast back at the end.
    dtype = jnp.result_type(grid.dtype, *(c.dtype for c in coordinates
                                          if jnp.issubdtype(c.dtype, jnp.floating)))
    coords = [c.astype(dtype).reshape(-1) for c in coordinates]
    _, interpolated = _bound(grid.ndim, _SHARDED)
    flat = dict(order=order, mode=_MODES[mode], derivative=(0,) * grid.ndim)
    values = interpolated(grid.astype(dtype), *coords, **flat)
    if mode == "constant" and not (isinstance(cval, (int, float)) and cval == 0):
        # Points outside the grid take cval: their weights are what the grid's
        # inside leaves of 1.
        outside = 1 - interpolated(jnp.ones(grid.shape, dtype), *coords, **flat)
        values = values + jnp.asarray(cval, dtype) * outside
    return values.astype(grid.dtype).reshape(shape)
