"""`xlabind.ops.map_coordinates`: jax.scipy.ndimage.map_coordinates as native
kernels (ffi/ops/map_coordinates: threads on the CPU, CUDA on GPUs), bound
with xlabind's API for native targets, and beyond jax's orders 0 and 1 the
B-splines of orders 2 to 5 that scipy.ndimage.map_coordinates has: SciPy's
prefilter (xlabind.ops.spline_filter, after SciPy's padding for "nearest" and
"constant"), then the same kernels on the coefficients. Throughout:

* the interpolation is linear in the grid: ``xlabind.linear`` of the native
  gather, with the native scatter-add (atomics on the GPU) as its transpose;
* in the coordinates it is differentiable through a JVP rule written in JAX
  (``linear``'s ``jvp=xlabind.traceable(...)``): the same kernel with its
  weights differentiated; xlabind derives the scatter's derivative in the
  coordinates from it, so every derivative in either argument, to any
  order and in any composition (``jax.hessian`` over both), works;
* vmap calls the kernels once on the whole batch (their leading dimensions);
* under a sharded jit the points are split across devices (each device
  interpolates its own points; no gather), and the grid's gradient, a sum
  over points, is each device's scatter-add of its points summed across
  devices (the transpose of the independent points is a summed factor).
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

# The package's public names, from the modules that define them: `import
# xlabind` here would run back up to the package, whose __init__ imports
# xlabind.ops last (tests/api/test_module_graph.py).
from xlabind._primitive.traced_rules import traceable
from xlabind._runtime.native_targets import ffi_target
from xlabind.linear import linear
from xlabind.ops._native import NATIVE_PLATFORMS
from xlabind.ops.map_coordinates import tpu_formulation
from xlabind.ops.modes import Mode
from xlabind.ops.spline_filter.op import checked_order, spline_filter

# jax's mode names, read as jax reads them at every order ("constant" and
# "wrap" are SciPy's "grid-constant" and "grid-wrap"), and SciPy's grid-*
# names for the same: the kernels' mode each names.
_MODES = {
    "constant": Mode.CONSTANT,
    "nearest": Mode.NEAREST,
    "wrap": Mode.WRAP,
    "mirror": Mode.MIRROR,
    "reflect": Mode.REFLECT,
    "grid-constant": Mode.CONSTANT,
    "grid-wrap": Mode.WRAP,
    "grid-mirror": Mode.REFLECT,
}
# SciPy pads this much before filtering for "nearest" (edge values) and
# "grid-constant" (cval), whose extensions no recursion starts from exactly.
_SPLINE_PAD = 12
# On TPUs, which run no native handlers, the same computations in JAX.
_GATHER = ffi_target(
    "xlabind_map_coordinates",
    platforms=NATIVE_PLATFORMS,
    formulations={"tpu": tpu_formulation.map_coordinates_gather},
)
_SCATTER = ffi_target(
    "xlabind_map_coordinates_transpose",
    platforms=NATIVE_PLATFORMS,
    formulations={"tpu": tpu_formulation.map_coordinates_scatter},
)


#: Whether the kernels declare their sharding rule (always, but for
#: tools/benchmarks, which compares with running once per program).
_SHARDED = True


@functools.cache
def _bound(ndim: int, sharded: bool = True):
    """(grid, coordinates...) -> values for an ndim-D grid: linear in the grid,
    differentiable in the coordinates. The kernels take the grid and one
    array of coordinates per axis, each (*batch, points); leading batch
    dimensions (vmap) broadcast."""

    def values(grid, *coords, **_):
        batch = jax.lax.broadcast_shapes(grid.shape[: grid.ndim - ndim], coords[0].shape[:-1])
        return jax.ShapeDtypeStruct((*batch, coords[0].shape[-1]), grid.dtype)

    def rule(grid, *coords, **_):
        """The points and the batch are independent; the grid stays whole on
        every device. A batch dimension of size 1 that broadcasts is its own."""
        batch = values(grid, *coords).shape[:-1]
        ones = iter(range(grid.ndim + sum(c.ndim for c in coords)))

        def batched(lead):
            start = len(batch) - len(lead)
            return [
                f"b{start + k}" if d == batch[start + k] else f"one{next(ones)}"
                for k, d in enumerate(lead)
            ]

        grid_factors = batched(grid.shape[: grid.ndim - ndim]) + [f"g{k}" for k in range(ndim)]
        operands = [grid_factors] + [batched(c.shape[:-1]) + ["p"] for c in coords]
        result = [f"b{k}" for k in range(len(batch))] + ["p"]
        return (
            ", ".join(" ".join(f) or "()" for f in operands) + " -> " + (" ".join(result) or "()")
        )

    def coordinate_jvp(grid, *args, order, mode, derivative):
        """The derivative in the coordinates: per axis, the interpolation with
        that axis' weights differentiated once more, times the axis' tangent
        (a degree-k spline's k-th derivative is flat between nodes). Linear in
        the grid, as the linear binding needs: its transpose, the scatter,
        gets its own derivative in the coordinates from this rule."""
        coords, t_coords = args[:ndim], args[ndim:]
        terms = []
        for axis, t in enumerate(t_coords):
            if t is None or derivative[axis] >= order:
                continue
            steeper = tuple(d + (a == axis) for a, d in enumerate(derivative))
            terms.append(
                interpolated(grid, *coords, order=order, mode=mode, derivative=steeper) * t
            )
        if not terms:
            return jnp.zeros(values(grid, *coords).shape, grid.dtype)
        return sum(terms[1:], terms[0])

    interpolated = linear(
        _GATHER,
        _SCATTER,
        values,
        nondiff_argnums=range(1, ndim + 1),
        jvp=traceable(coordinate_jvp),
        vmap_method="expand_dims",
        sharding_rule=rule if sharded else None,
        # The kernels fail only on shapes and arguments, which every device's
        # shard shares: no device can fail alone, so none waits for a
        # failure exchange (a collective that a branch only some devices
        # take would strand; jax's own ops need none).
        stop_all_devices=False,
        name="map_coordinates",
    )
    # The kernels read every coordinate array with the same batch layout: under
    # vmap a coordinate array that is not batched is broadcast like the others
    # (derived calls, the scatter among them, inherit the pairs).
    interpolated.definition.aligned_pairs = tuple((1, k) for k in range(2, ndim + 1)) + tuple(
        (k, 1) for k in range(2, ndim + 1)
    )
    # A grid of batch size 1 broadcasts against the coordinates' rows, and the
    # scatter adds every row's points into it: under vmap over coordinates
    # alone the kernels read the one grid, not a copy per batch element.
    interpolated.definition.linear_broadcasts = True
    return interpolated


def map_coordinates(
    input,
    coordinates: Sequence,
    order: int,
    mode: str = "constant",
    cval=0.0,
    prefilter: bool = True,
) -> jax.Array:
    """Interpolates ``input`` at ``coordinates``, like
    :func:`jax.scipy.ndimage.map_coordinates` (orders 0 and 1) and
    :func:`scipy.ndimage.map_coordinates` (orders 2 to 5), with native kernels.

    Args:
      input: the N-dimensional grid (1 to 8 dimensions; float32 or float64).
      coordinates: N arrays (broadcast together), the fractional grid indices
        of the points, one array per grid dimension.
      order: 0 (nearest), 1 (linear), or 2 to 5 (B-spline of that degree);
        an integer-valued number, as jax accepts it (``1.0`` and ``True``
        are 1).
      mode: ``"constant"``, ``"nearest"``, ``"wrap"``, ``"mirror"`` or
        ``"reflect"``, read as jax reads them at every order: ``"constant"``
        and ``"wrap"`` are SciPy's ``"grid-constant"`` and ``"grid-wrap"``
        (accepted too, as is ``"grid-mirror"`` for ``"reflect"``). SciPy's
        own ``"constant"`` (cval at once past the edge) and ``"wrap"``
        (period n - 1) are not offered.
      cval: the value outside the grid in ``"constant"`` mode. A NaN or
        infinite cval marks the outside: points inside keep their values
        (orders 0 and 1 as jax: cval where a point reads a node outside;
        orders 2 to 5 as SciPy's ``mode="constant"``, the spline of the
        mirrored grid inside ``[0, n - 1]``), points outside get cval.
      prefilter: for orders 2 to 5, whether ``input`` holds samples, which
        are first turned into spline coefficients (:func:`spline_filter`, as
        SciPy does: after padding 12 samples for "nearest" and "constant"),
        or coefficients already.

    Returns:
      The interpolated values, shaped like the (broadcast) coordinates, of
      ``input``'s dtype. Differentiable in ``input`` (through the prefilter's
      native transpose and the scatter-add) and ``coordinates`` (the
      B-spline's derivatives: order k is k - 1 times continuously
      differentiable); vmap runs the kernels once on the whole batch. Every
      coordinate has a value: NaN gives NaN, infinities and coordinates too
      large for jax's int32 indices follow the table of the interpolation guide
      ("Every coordinate has a value"). A grid with an empty dimension
      gives ``cval`` in constant mode and is an error in the others (there is
      nothing to read). Other dtypes (integers, complex) and grids beyond 8
      dimensions are handed to jax's own implementation (orders 0 and 1).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from xlabind.ops import map_coordinates
      >>> grid = jnp.arange(12.0).reshape(3, 4)
      >>> map_coordinates(grid, [jnp.array([0.5, 2.0]), jnp.array([1.0, 3.5])], order=1)
      Array([3. , 5.5], dtype=float32)
      >>> wave = jnp.sin(jnp.linspace(0.0, 3.0, 31))  # samples 0.1 apart
      >>> at = jnp.array([12.5])                       # x = 1.25
      >>> float(map_coordinates(wave, [at], order=3, mode="mirror")[0])  # doctest: +ELLIPSIS
      0.94898...
      >>> slope = jax.grad(lambda t: map_coordinates(wave, [t], order=3, mode="mirror")[0])
      >>> float(slope(at)[0]) * 10  # d sin(x)/dx = cos(1.25)  # doctest: +ELLIPSIS
      0.3153...
    """
    where = "xlabind.ops.map_coordinates"
    order = checked_order(where, order, 0)
    if not isinstance(mode, str) or mode not in _MODES:
        raise NotImplementedError(f"{where}: mode must be one of {sorted(_MODES)}, got {mode!r}")
    # A number is static, as jax's map_coordinates takes it (its zero then
    # needs no outside term); an array is traced.
    number = isinstance(cval, (int, float, np.number)) and not isinstance(cval, np.ndarray)
    if not number:
        _check_cval(where, cval)
    coordinates = list(coordinates)
    try:
        jnp.broadcast_shapes(*(np.shape(c) for c in coordinates))
    except ValueError:
        shapes = ", ".join(str(np.shape(c)) for c in coordinates)
        raise ValueError(
            f"{where}: coordinates must broadcast together, got shapes {shapes}"
        ) from None
    return _map_coordinates(
        as_array(input),
        [as_array(c) for c in coordinates],
        None if number else cval,
        order=order,
        mode=mode,
        prefilter=bool(prefilter),
        static_cval=cval if number else None,
        sharded=_SHARDED,
    )


def _check_cval(where: str, cval) -> None:
    """A cval that is not a Python or NumPy number: a numeric scalar array."""
    if isinstance(cval, complex):
        return
    dtype = getattr(cval, "dtype", None)
    if dtype is None or not (jnp.issubdtype(dtype, jnp.number) or dtype == np.bool_):
        raise TypeError(
            f"{where}: cval must be a number or a 0-d numeric array, got "
            f"{type(cval).__name__}{'' if dtype is None else f' of dtype {dtype}'}"
        )
    if np.shape(cval) != ():
        raise TypeError(
            f"{where}: cval must be a number or a 0-d numeric array, got shape {np.shape(cval)}"
        )


def as_array(x):
    """`x` as jit takes it: arrays and scalars as they are, sequences as arrays."""
    return jnp.asarray(x) if isinstance(x, (list, tuple)) else x


# One executable per static configuration and shapes, as jax's own op: called
# eagerly, the ops below are one dispatch, not one per jnp operation.
@functools.partial(
    jax.jit, static_argnames=("order", "mode", "prefilter", "static_cval", "sharded")
)
def _map_coordinates(
    grid, coordinates, traced_cval, *, order, mode, prefilter, static_cval, sharded
):
    where = "xlabind.ops.map_coordinates"
    cval = traced_cval if static_cval is None else static_cval
    grid = jnp.asarray(grid)
    coordinates = [jnp.asarray(c) for c in coordinates]
    if len(coordinates) != grid.ndim:
        raise ValueError(
            f"{where}: coordinates must be a sequence of length input.ndim, but "
            f"{len(coordinates)} != {grid.ndim}"
        )
    if grid.dtype not in (jnp.float32, jnp.float64) or not 1 <= grid.ndim <= 8:
        if order > 1:
            raise NotImplementedError(
                f"{where}: order {order} needs a float32 or float64 grid of 1 to 8 dimensions, "
                f"got {grid.dtype} of shape {grid.shape}"
            )
        return jax.scipy.ndimage.map_coordinates(grid, coordinates, order, mode, cval)
    coordinates = jnp.broadcast_arrays(*coordinates)
    shape = coordinates[0].shape
    if grid.size == 0:
        if _MODES[mode] != Mode.CONSTANT:
            raise ValueError(
                f"{where}: mode {mode!r} has nothing to read in a grid with an "
                f"empty dimension (shape {grid.shape}); only mode='constant' "
                f"(every point is outside: cval) has values"
            )
        return jnp.full(shape, cval, grid.dtype)
    # jax computes the weights in the coordinates' precision: float64
    # coordinates on a float32 grid run in float64, cast back at the end.
    dtype = jnp.result_type(
        grid.dtype, *(c.dtype for c in coordinates if jnp.issubdtype(c.dtype, jnp.floating))
    )
    coords = [_points(c.astype(dtype)) for c in coordinates]
    interpolate = functools.partial(
        _interpolate, grid.astype(dtype), coords, order, prefilter=prefilter, sharded=sharded
    )
    if _MODES[mode] != Mode.CONSTANT or order < 2:
        values = interpolate(mode, cval)
    elif static_cval is not None:
        values = (
            interpolate(mode, cval)
            if math.isfinite(cval)
            else _marked_outside(interpolate, coords, grid.shape, cval)
        )
    else:
        # A traced cval: its finite and non-finite meanings, selected (the
        # unselected branch gets a finite cval, so that no NaN reaches a gradient).
        cval = jnp.asarray(cval, dtype)
        finite = jnp.isfinite(cval)
        values = jnp.where(
            finite,
            interpolate(mode, jnp.where(finite, cval, 0)),
            _marked_outside(interpolate, coords, grid.shape, cval),
        )
    return values.astype(grid.dtype).reshape(shape)


def _points(c):
    """A coordinate array as the kernels read it: (*rows, points), its rows
    kept as the kernels' batch. Flattening an array split along any
    dimension but the first would gather it, where jax's own
    map_coordinates keeps the split. Rows over one grid cost nothing: the
    kernels read them as one flat run (ffi/ops/map_coordinates/geometry.h)."""
    return c.reshape(1) if c.ndim == 0 else c


def _interpolate(coefficients, coords, order, mode, cval, *, prefilter, sharded):
    """The values at `coords` (one array (*rows, points) per axis) in `mode`
    (jax's meaning)."""
    ndim, dtype = coefficients.ndim, coefficients.dtype
    if order > 1 and prefilter:
        coefficients, coords = _spline_coefficients(coefficients, coords, order, mode, cval)
    interpolated = functools.partial(_rows_of, _bound(ndim, sharded), coords[0].ndim - 1)
    # The kernels' attributes: plain ints, as the programs they are in carry them.
    flat = dict(order=order, mode=int(_MODES[mode]), derivative=(0,) * ndim)
    values = interpolated(coefficients, *coords, **flat)
    if _MODES[mode] == Mode.CONSTANT and not (
        isinstance(cval, (int, float, np.number)) and cval == 0
    ):
        # Nodes outside the grid read cval: their weights are what the grid's
        # inside leaves of 1. Only where a point reads a node outside: a NaN
        # or infinite cval times rounding's tiny weight is NaN (selected
        # before the product, so that no NaN reaches a gradient).
        outside = 1 - interpolated(jnp.ones(coefficients.shape, dtype), *coords, **flat)
        cval = jnp.asarray(cval, dtype)
        if order < 2:
            cval = jnp.where(_reads_outside(coords, coefficients.shape, order), cval, 0)
        values = values + cval * outside
    return values


def _rows_of(interpolated, rows: int, grid, *coords, **kwargs):
    """The kernels on coordinates with `rows` leading dimensions: the grid
    gets as many of size 1, which broadcast."""
    return interpolated(grid.reshape((1,) * rows + grid.shape), *coords, **kwargs)


def _reads_outside(coords, shape, order):
    """Whether each point reads a node outside the grid, on some axis: order
    0's node (lax.round, half away from zero), order 1's two (at n - 1 the
    upper one, with weight 0 but a slope, as in jax)."""
    if order == 0:
        marks = [(c <= -0.5) | (c >= n - 0.5) for c, n in zip(coords, shape)]
    else:
        marks = [(c < 0) | (c >= n - 1) for c, n in zip(coords, shape)]
    return functools.reduce(operator.or_, marks)


def _past_the_edges(coords, shape):
    """Whether each point lies outside [0, n - 1] on some axis (SciPy's outside)."""
    return functools.reduce(operator.or_, [(c < 0) | (c > n - 1) for c, n in zip(coords, shape)])


def _marked_outside(interpolate, coords, shape, cval):
    """Orders 2 to 5 with a NaN or infinite cval ("NaN marks the outside"):
    SciPy's mode="constant", the spline of the mirrored grid inside [0, n - 1]
    and cval past it, since the grid-constant spline would spread cval
    through every coefficient."""
    outside = _past_the_edges(coords, shape)
    return jnp.where(outside, jnp.asarray(cval, coords[0].dtype), interpolate("mirror", 0.0))


def _spline_coefficients(grid, coords, order, mode, cval):
    """The B-spline coefficients SciPy interpolates for `mode`, and the
    coordinates in them: for "nearest" and "constant" of the grid padded by
    12 (edge values, cval) on every side, coordinates shifted to match."""
    if _MODES[mode] in (Mode.NEAREST, Mode.CONSTANT):
        pad = [(_SPLINE_PAD, _SPLINE_PAD)] * grid.ndim
        if _MODES[mode] == Mode.NEAREST:
            grid = jnp.pad(grid, pad, mode="edge")
        else:
            # cval times a border of ones, not jnp.pad(constant_values=cval),
            # which jax cannot differentiate with respect to a traced cval.
            border = jnp.pad(jnp.zeros(grid.shape, grid.dtype), pad, constant_values=1)
            grid = jnp.pad(grid, pad) + jnp.asarray(cval, grid.dtype) * border
        coords = [c + _SPLINE_PAD for c in coords]
    return spline_filter(grid, order, mode), coords
