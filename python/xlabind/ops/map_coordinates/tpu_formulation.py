"""xlabind.ops.map_coordinates on TPUs: the native kernels' targets written
in JAX, which a TPU program lowers in their place (XLA on a TPU runs no
native handlers). Each computes what its CPU kernel computes
(ffi/ops/map_coordinates/interpolation.h), so everything above the kernels
(prefilter padding, cval, derivatives, vmap) is shared.

As measured on a v5e (docs/guides/tpu.md): a TPU gathers per index, almost
whatever a row's width, so each point reads ONE row of a "tap table" that
holds, per cell, every node a point in it reads. Boundary
modes fold into the table: the grid is first extended by k + 1 nodes on
each side through the mode, and each axis' first node is moved into the
extension's range (clamped for constant and nearest, whose far nodes all
read alike; taken modulo the period for the periodic modes, where a
mirrored run of nodes is read backwards with its weights reversed). Where
the packed table fits the chip's vector memory, a Pallas kernel loads the
rows there (tpu_kernels.py); where it does not but the grid cut into
patches does (tpu_kernels.patch_table), the kernel reads each point's
(k + 1)^(ndim - 2) patch rows -- from one table, or, where that is too
large too, from one table per chunk of axis 2, each point taking the value
of the chunk its first node lies in; elsewhere an XLA gather reads the table (or
per-node tables of axes 1 on) where its rows are narrow enough
(MAX_GATHER_TAPS), else one gather per node.

The grid's gradient (the transpose) adds each point's weighted cotangent
into its row(s) by the kernels' scatters where a table fits, else it is
the JAX derivative of one gather per node. The op's targets carry these as
their TPU formulation (op.py).

The points run in chunks of a fixed size (CHUNK_ELEMENTS; a symbolic
count, jax.export's, in chunks of SYMBOLIC_CHUNK_POINTS), the tables made
once for all of them, so that neither memory beyond the points' own
arrays nor the program grows with their count. Each axis' period is taken
in integers, exactly for every float. Under Explicit mesh axes each
device runs its own points (a TPU lowers a Pallas kernel only inside a
shard_map over every mesh axis).
"""

from __future__ import annotations

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec

from xlabind.ops.bspline import bspline
from xlabind.ops.map_coordinates import tpu_kernels
from xlabind.ops.modes import Mode

#: A tap table beyond this many elements is not built (one gather per node instead).
MAX_TABLE_ELEMENTS = 1 << 28
#: The widest rows an XLA gather reads from a tap table on a TPU. Measured on
#: a v5e at 2^20 points: 27 taps (order 2 at 128^3) take 1 GB of temporaries,
#: 64 (order 3 at 100^3) and 216 (order 5 at 64^3) ask for 66 and 89 GB.
MAX_GATHER_TAPS = 32
#: The most patch tables (chunks of axis 2) a grid is read through; each
#: chunk's kernel reads every point. Measured on a v5e at 256^3 and 2^20
#: points: order 3 in two chunks 37 ms (its grid gradient 41), against 570
#: (757) by per-node gathers; order 5 in three 91 ms.
MAX_PATCH_CHUNKS = 16


# -- one axis: the first node of each point, and its nodes' weights ----------


def _bspline_derivative(k: int, m: int, t):
    if m == 0:
        return bspline(k, t)
    if m > k:
        return jnp.zeros_like(t)
    total, binomial = jnp.zeros_like(t), 1.0
    for i in range(m + 1):
        term = binomial * bspline(k - m, t + m / 2 - i)
        total = total - term if i & 1 else total + term
        binomial = binomial * (m - i) / (i + 1)
    return total


def _cubic_weights(x, d: int):
    y, x2 = 1 - x, x * x
    if d == 0:
        x3 = x2 * x
        w0, w1, w3 = y * y * y / 6, (3 * x3 - 6 * x2 + 4) / 6, x3 / 6
        return [w0, w1, 1 - w0 - w1 - w3, w3]
    if d == 1:
        return [-0.5 * y * y, (3 * x2 - 4 * x) * 0.5, (2 * x - 3 * x2 + 1) * 0.5, x2 * 0.5]
    if d == 2:
        return [y, 3 * x - 2, 1 - 3 * x, x]
    if d == 3:
        return [jnp.full_like(x, c) for c in (-1.0, 3.0, -3.0, 1.0)]
    return [jnp.zeros_like(x)] * 4


def _spline_weights(k: int, x, d: int) -> list:
    if k == 3:
        return _cubic_weights(x, d)
    if k == 2 and d == 0:
        w0, w2 = (0.5 - x) ** 2 / 2, (0.5 + x) ** 2 / 2
        return [w0, 1 - w0 - w2, w2]
    return [_bspline_derivative(k, d, x + k // 2 - j) for j in range(k + 1)]


def _index_modulo(x, period: int):
    """x (finite integral floats, any magnitude) modulo `period` (< 2^31),
    in [0, period), int32, exactly. A float remainder is not exact on a TPU
    for huge operands; integers are: x itself where it fits an integer,
    else its significand m and exponent e (x = m 2^e), m's residue doubled
    e times modulo the period, a few bits a step."""
    finfo = jnp.finfo(x.dtype)
    wide = jnp.dtype(f"int{finfo.bits}")
    exact = 2.0 ** (finfo.bits - 2)  # |x| below it converts to `wide` exactly
    small = jnp.abs(x) < exact
    residue = jnp.remainder(jnp.where(small, x, 0).astype(wide), period).astype(jnp.int32)

    def huge(residue):
        bits = lax.bitcast_convert_type(x, wide)
        exponent = ((bits >> finfo.nmant) & ((1 << finfo.nexp) - 1)) - (finfo.maxexp - 1)
        shift = (exponent - finfo.nmant).astype(jnp.int32)  # x = significand 2^shift
        significand = (bits & ((1 << finfo.nmant) - 1)) | (1 << finfo.nmant)
        r = jnp.remainder(significand, period).astype(jnp.uint32)
        # r < period: r 2^step stays below 2^32.
        step = 32 - int(period).bit_length()
        most = finfo.maxexp - 1 - finfo.nmant  # the largest shift a finite float has

        def double(i, r):
            by = jnp.clip(shift - i * step, 0, step).astype(jnp.uint32)
            return (r << by) % jnp.uint32(period)

        r = lax.fori_loop(0, -(-most // step), double, r).astype(jnp.int32)
        r = jnp.where(x < 0, (period - r) % period, r)
        return jnp.where(small, residue, r)

    return lax.cond(jnp.all(small), lambda r: r, huge, residue)


def _axis(c, n: int, k: int, mode: int, d: int):
    """(first node's cell in the extended axis, int32; the k + 1 weights; NaN mask)."""
    finite = jnp.isfinite(c)
    nan = jnp.isnan(c) if mode in (Mode.CONSTANT, Mode.NEAREST) else ~finite
    cf = jnp.where(finite, c, 0)
    if k == 0:
        base = lax.round(cf)
        weights = [jnp.full_like(cf, 1.0 if d == 0 else 0.0)]
    elif k == 1:
        base = jnp.floor(cf)
        u = cf - base
        weights = (
            [1 - u, u]
            if d == 0
            else ([-jnp.ones_like(u), jnp.ones_like(u)] if d == 1 else [jnp.zeros_like(u)] * 2)
        )
    elif k & 1:
        base = jnp.floor(cf)
        weights = _spline_weights(k, cf - base, d)
    else:
        # Half up, as floor(cf + 0.5) in exact arithmetic (the CPU kernels'
        # double): cf + 0.5 rounds in cf's own type from 2^(mantissa - 1) on.
        below = jnp.floor(cf)
        base = jnp.where(cf - below >= 0.5, below + 1, below)
        weights = _spline_weights(k, cf - base, d)
    weights = [w.astype(c.dtype) for w in weights]
    pad = k + 1
    if mode in (Mode.CONSTANT, Mode.NEAREST) or n == 1:
        start = jnp.clip(base - k // 2, -pad, n)
        # An infinite coordinate reads the edge (nearest) or the outside
        # (constant): its nodes all lie in the extension, weighted as the
        # kernel weights them.
        start = jnp.where(finite, start, jnp.where(c > 0, n, -pad)).astype(jnp.int32)
        at_edge = [1.0 if (j == 0 and d == 0) else 0.0 for j in range(k + 1)]
        if k == 1 and d == 1:
            at_edge = [-1.0, 1.0]
        weights = [jnp.where(finite, w, jnp.asarray(e, w.dtype)) for w, e in zip(weights, at_edge)]
        flip = None
    else:
        period = n if mode == Mode.WRAP else (2 * n - 2 if mode == Mode.MIRROR else 2 * n)
        start = jnp.remainder(_index_modulo(base, period) - k // 2, period)
        flip = None
        if mode == Mode.MIRROR:
            flip = start > n - 1
            start = jnp.where(flip, period - start - k, start)
        elif mode == Mode.REFLECT:
            flip = start > n - 1
            start = jnp.where(flip, period - 1 - start - k, start)
    if flip is not None:
        weights = [jnp.where(flip, r, w) for w, r in zip(weights, weights[::-1])]
    cell = jnp.where(nan, 0, start) + pad
    return cell, weights, nan


# -- the grid extended through the mode, and its tap table -------------------


# jnp.pad's names for the modes (NumPy's "reflect" is our mirror).
_PAD_MODES = {
    Mode.CONSTANT: "constant",
    Mode.NEAREST: "edge",
    Mode.WRAP: "wrap",
    Mode.MIRROR: "reflect",
    Mode.REFLECT: "symmetric",
}


def extended(grid, k: int, mode: int):
    """`grid` extended by k + 1 nodes on each side of each axis through `mode`
    (zeros outside in constant mode, whose outside nodes read nothing): the
    nodes xlabind.ops.modes.mapped_nodes gives, by pads (slices of the grid; a gather of whole
    planes was measured 5x slower on a v5e at 256^3)."""
    for axis, n in enumerate(grid.shape):
        widths = [(0, 0)] * grid.ndim
        widths[axis] = (k + 1, k + 1)
        how = "edge" if n == 1 and mode != Mode.CONSTANT else _PAD_MODES[Mode(mode)]
        grid = jnp.pad(grid, widths, mode=how)
    return grid


def tap_table(ext, k: int):
    """((k + 1)^ndim, cells): per cell of the extended grid, the nodes a point
    whose first node is that cell reads, axis 0's tap outermost. Taps first:
    a TPU pads an array's last dimension to 128 lanes."""
    cells = [m - k for m in ext.shape]
    taps = [
        ext[tuple(slice(t, t + c) for t, c in zip(offset, cells))].reshape(-1)
        for offset in itertools.product(range(k + 1), repeat=ext.ndim)
    ]
    return jnp.stack(taps)


def _packed_layout(ext_shape, k: int) -> tuple[int, tuple[int, ...]]:
    """(cells a packed row holds, the shape its rows are indexed by) for the
    packed tap table of a grid extended to `ext_shape` (spatial): axis 0's
    cells split as (a, cells a row holds), the others' cells after a, the
    last padded to whole tiles of 8 rows (a alone in 1-D). A row holds
    consecutive cells of axis 0, a power of two of them: a point's row and
    place are a shift and a mask of its first cell."""
    per = tpu_kernels.LANES // (k + 1) ** len(ext_shape)
    cells = [m - k for m in ext_shape]
    a = -(-cells[0] // per)
    if len(cells) == 1:
        return per, (-(-a // 8) * 8,)
    return per, (a, *cells[1:-1], -(-cells[-1] // 8) * 8)


def packed_table_rows(batch: int, ext_shape, k: int) -> int:
    """The rows of packed_tap_table for `batch` grids extended to `ext_shape`."""
    return batch * math.prod(_packed_layout(ext_shape, k)[1])


def packed_tap_table(ext, k: int):
    """(rows, 128): the tap table of extended grids (batch, *spatial) as
    the kernels read it, 128 // taps cells of (k + 1)^ndim taps to a row of
    128 lanes, made without flattening a grid: each tap's slice, padded to
    the layout, its axis 0 split in two, moved past the others. Measured on a
    v5e at 1024^2: made from the flat table, XLA compiled it in 4.0 s and
    ran it in 2.4 ms (its pullback 1.3 s, 6.3 ms); this way 0.34 s and 0.8
    ms (0.6 s, 0.7 ms)."""
    batch, *spatial = ext.shape
    ndim = len(spatial)
    per, rows = _packed_layout(spatial, k)
    cells = [m - k for m in spatial]
    padded = [per * rows[0], *rows[1:]]
    taps = []
    for offset in itertools.product(range(k + 1), repeat=ndim):
        tap = ext[(slice(None), *(slice(t, t + c) for t, c in zip(offset, cells)))]
        taps.append(jnp.pad(tap, [(0, 0), *((0, p - c) for p, c in zip(padded, cells))]))
    table = jnp.stack(taps).reshape(len(taps), batch, rows[0], per, *rows[1:])
    # (batch, *rows, per, taps): a row's cells one after another, each its taps.
    order = (1, 2, *range(4, 3 + ndim), 3, 0)
    return table.transpose(order).reshape(-1, tpu_kernels.LANES)


def packed_position(firsts, ext_shape, k: int):
    """Each point's row of packed_tap_table and its cell's place in the row,
    flat: `firsts` its first cell on each axis, (batch, *points) each. A
    row holds a power of two of cells: a shift and a mask (XLA on a v5e
    compiled the geometry of (1024, 1024) points in 0.7 s so, in 1.2 s with
    an integer division and remainder)."""
    per, rows = _packed_layout(ext_shape, k)
    shift = per.bit_length() - 1
    row = _element_index(firsts[0]) * rows[0] + (firsts[0] >> shift)
    for first, n in zip(firsts[1:], rows[1:]):
        row = row * n + first
    return row.reshape(-1), (firsts[0] & (per - 1)).reshape(-1)


def _element_index(points):
    """Each point's batch element, broadcasting against `points` (batch, ...)."""
    index = lax.broadcasted_iota(jnp.int32, (points.shape[0],), 0)
    return index.reshape(-1, *[1] * (points.ndim - 1))


def _tap_weights(weights: list[list]) -> jax.Array:
    """((k + 1)^ndim, *points): the products of each axis' weights, in tap
    order, made from the last axis on: each weight of an axis times the
    block of the axes after it, the blocks concatenated. Measured on a v5e:
    the outer product of the axes' stacked weights reshaped to (taps,
    points) took XLA 30 s to compile at 2^22 points (8 taps), time growing
    with the points (132 s at 2^24); the axes' weights are held apart, as
    XLA on a CPU otherwise computes them anew in each product (its compile
    4x longer at order 5)."""
    axes = lax.optimization_barrier([jnp.stack(w) for w in weights])
    total = axes[-1]
    for w in reversed(axes[:-1]):
        total = jnp.concatenate([w[i : i + 1] * total for i in range(w.shape[0])])
    return total


def _geometry(ext_shape, coords, k, mode, derivative, grid_shape):
    """Each axis' (first cell, weights, NaN); each point's cell in the batch's
    table, its tap weights ((k + 1)^ndim, *points) and whether it is NaN, in
    the coordinates' shape (batch, *points)."""
    spatial = grid_shape[1:]
    axes = [_axis(c, n, k, mode, d) for c, n, d in zip(coords, spatial, derivative)]
    cells_shape = [m - k for m in ext_shape[1:]]
    strides = np.cumprod([1, *cells_shape[::-1]])[:-1][::-1]
    element = _element_index(coords[0])
    cell = sum(a[0] * int(s) for a, s in zip(axes, strides)) + element * math.prod(cells_shape)
    nan = functools.reduce(jnp.logical_or, [a[2] for a in axes])
    weights = _tap_weights([a[1] for a in axes])
    return axes, cell, weights, nan


def _kernel_scatter(grid_shape, dtype, coords, cotangent, order, mode, derivative):
    """The grid's cotangent through the kernels (scatter_packed_lanes where the tap
    table fits, else scatter_patches), or None where they do not apply: the
    table's cotangent, summed over the chunks of points, then the table's
    own derivative back to the grid (a sum of shifted slices, in XLA)."""
    k, ndim = order, len(coords)
    taps = (k + 1) ** ndim
    ext_shape = (grid_shape[0], *(n + 2 * (k + 1) for n in grid_shape[1:]))
    if dtype != jnp.float32:
        return None
    rows = packed_table_rows(grid_shape[0], ext_shape[1:], k) if tpu_kernels.packs(taps) else 0
    whole = rows > 0 and tpu_kernels.fits(rows, tpu_kernels.MAX_SCATTER_TABLE_BYTES)
    chunks = [] if whole else _patch_chunks(ext_shape, k)
    if not (whole or chunks):
        return None
    parts = [_PatchChunk(ext_shape, k, chunk) for chunk in chunks]

    def table_cotangent(arrays):
        """One chunk of points' (the table's cotangent, each grid's NaN term),
        the points as lane rows (the padding's cotangent of 0 adds nothing)."""
        *cs, ct = [tpu_kernels.lane_rows(x) for x in arrays]
        axes, cell, weights, nan = _geometry(ext_shape, cs, k, mode, derivative, grid_shape)
        ct = ct.astype(dtype)
        contribution = weights * jnp.where(nan, 0, ct)
        if whole:
            row, sub = packed_position([a[0] for a in axes], ext_shape[1:], k)
            lanes = tpu_kernels.LANES
            table_ct = tpu_kernels.scatter_packed_lanes(
                contribution.reshape(taps, -1, lanes),
                row.reshape(-1, lanes),
                sub.reshape(-1, lanes),
                rows,
            )
        else:
            contribution = contribution.reshape(taps, -1)
            table_ct = []
            for part in parts:
                row, lane, inside = part.position(axes, grid_shape[0])
                table_ct.append(
                    tpu_kernels.scatter_patches(
                        contribution if inside is None else jnp.where(inside, contribution, 0),
                        row,
                        lane,
                        part.offsets,
                        k,
                        part.rows,
                    )
                )
        # A NaN point reads node 0 with a NaN weight (as in the gather).
        first = jnp.where(nan, jnp.asarray(jnp.nan, dtype) * ct, 0)
        return table_ct, first.reshape(grid_shape[0], -1).sum(1)

    if whole:

        def table_of(ext):
            return packed_tap_table(ext, k)

    else:

        def table_of(ext):
            return [part.table(ext) for part in parts]

    table_ct, first = _summed_over_point_chunks(table_cotangent, [*coords, cotangent], taps)
    _, pullback = jax.vjp(
        lambda g: table_of(jax.vmap(lambda e: extended(e, k, mode))(g)),
        _varying_as(jnp.zeros(grid_shape, dtype), table_ct),
    )
    (grid_ct,) = pullback(table_ct)
    return grid_ct.at[(slice(None), *[0] * (len(grid_shape) - 1))].add(first)


def _first_node(grids):
    """(batch, 1): each grid's node 0, sliced where it lies: XLA on a TPU
    compiles a reshape of a whole large grid to one row (batch, nodes) in
    tens of seconds (27 s for 256^3 on a v5e)."""
    start = (0,) * grids.ndim
    return lax.slice(grids, start, (grids.shape[0], *[1] * (grids.ndim - 1))).reshape(-1, 1)


def _slab_table(ext, k: int):
    """(taps of axes 1 on, batch * ext_0 * their cells): per node of axis 0,
    the tap table of the rest: a point reads k + 1 rows of it, one per tap
    of axis 0 (for tables whose whole tap table is too large to gather)."""
    per_node = jax.vmap(jax.vmap(lambda e: tap_table(e, k), out_axes=1), out_axes=1)(ext)
    return per_node.reshape(per_node.shape[0], -1)


def _slab_rows(slab_table, ext_shape, k: int, first, cell, cells: int):
    """((k + 1)^ndim, points) through the slab table (_slab_table of extended
    grids of `ext_shape`): row (first + l) of axis 0 for each tap l, in one
    gather for all of them."""
    rest = math.prod(m - k for m in ext_shape[2:])
    within = cell % cells  # the cell in its batch element's table
    element = cell // cells
    rest_cell = within % rest
    slab = [(element * ext_shape[1] + first + tap) * rest + rest_cell for tap in range(k + 1)]
    rows = _gather(slab_table, jnp.concatenate(slab))
    # Each tap's run of points, stacked by slices: a reshape that moves the
    # taps past the points is what XLA on a TPU compiles in time growing
    # with the points (see _tap_weights).
    points = cell.shape[0]
    return jnp.concatenate([rows[:, tap * points : (tap + 1) * points] for tap in range(k + 1)])


def _patch_chunks(ext_shape, k: int) -> list:
    """The patch tables extended grids (batch, *spatial) are read through:
    [None] for one table of the whole grids; else ranges [start, stop) of
    first cells along spatial axis 2, each chunk's table within
    MAX_PATCH_TABLE_BYTES; [] where none fits or more than MAX_PATCH_CHUNKS
    would be needed."""
    if len(ext_shape) < 3:
        return []
    table_bytes = tpu_kernels.patch_table_bytes(ext_shape[0], ext_shape[1:], k)
    limit = tpu_kernels.MAX_PATCH_TABLE_BYTES
    if table_bytes <= limit:
        return [None]
    if len(ext_shape) < 4:
        return []
    nodes = ext_shape[3]
    cells = nodes - k
    per_chunk = limit // (table_bytes // nodes) - k  # first cells a fitting chunk holds
    if per_chunk < 1 or -(-cells // per_chunk) > MAX_PATCH_CHUNKS:
        return []
    size = -(-cells // -(-cells // per_chunk))  # the chunks evened out
    return [(start, min(start + size, cells)) for start in range(0, cells, size)]


class _PatchChunk:
    """One patch table of the extended grids (tpu_kernels.patch_table: the
    first two axes cut into overlapping patches, a row each per node of the
    others), of the whole grids (chunk None) or of the first cells [start,
    stop) of spatial axis 2, and where each point reads it: (k + 1)^(ndim - 2)
    rows, one per tap of the other axes."""

    def __init__(self, ext_shape, k: int, chunk: tuple[int, int] | None):
        self.k, self.chunk = k, chunk
        shape = list(ext_shape)
        if chunk is not None:
            shape[3] = chunk[1] - chunk[0] + k
        self.batch, n0, n1, *others = shape
        self.others = tuple(others)
        self.counts = tpu_kernels.patch_counts((n0, n1), k)
        self.rows = tpu_kernels.patch_rows(self.batch, tuple(shape[1:]), k)
        strides = np.cumprod([1, *others[::-1]])[::-1][1:]
        self.offsets = tuple(
            int(sum(o * s for o, s in zip(offset, strides)))
            for offset in itertools.product(range(k + 1), repeat=len(others))
        )

    def table(self, ext):
        if self.chunk is not None:
            ext = lax.slice_in_dim(ext, self.chunk[0], self.chunk[1] + self.k, axis=3)
        return tpu_kernels.patch_table(ext.reshape(*ext.shape[:3], -1), self.k)

    def position(self, axes, batch: int):
        """Each point's first row and its first node's lane, flat, and
        whether its first node lies in the chunk (None: all do). A point
        outside reads the chunk's nearest cell."""
        firsts = [a[0] for a in axes]
        inside = None
        if self.chunk is not None:
            start, stop = self.chunk
            inside = ((firsts[2] >= start) & (firsts[2] < stop)).reshape(-1)
            firsts[2] = jnp.clip(firsts[2] - start, 0, stop - start - 1)
        rest = jnp.zeros_like(firsts[0])
        for first, n in zip(firsts[2:], self.others):
            rest = rest * n + first
        row, lane = tpu_kernels.patch_position(
            _element_index(firsts[0]),
            firsts[0],
            firsts[1],
            rest,
            math.prod(self.others),
            self.k,
            self.counts,
        )
        return row.reshape(-1), lane.reshape(-1), inside


def _gather(table, cell):
    """(taps, points): column `cell[p]` of `table`, by an XLA gather."""
    # Held as an array of its own: XLA on a TPU otherwise folds the gather
    # into the slices the table is made of, reading a whole line of cells
    # per point.
    return jnp.take(lax.optimization_barrier(table), cell, axis=1, mode="clip")


def _interpolate(
    grid, coords, order: int, mode: int, derivative, use_kernel: bool, per_node: bool = False
):
    """Grids (batch, *spatial) and coordinates (batch, points) per axis: the
    batch is read as one table (each element's cells after the previous
    one's), so that the kernel and the gather run once for all of it, and
    the points chunk by chunk. `per_node` reads each node with a gather of
    its own (no table)."""
    k, ndim = order, len(coords)
    batch = grid.shape[0]
    ext = jax.vmap(lambda g: extended(g, k, mode))(grid)
    cells = math.prod(m - k for m in ext.shape[1:])
    taps = (k + 1) ** ndim
    slab_taps = (k + 1) ** (ndim - 1)
    slab_elements = slab_taps * batch * ext.shape[1] * cells // (ext.shape[1] - k)
    whole = not per_node and batch * cells * taps <= MAX_TABLE_ELEMENTS and taps <= MAX_GATHER_TAPS
    slabs = not per_node and ndim > 1 and slab_elements <= MAX_TABLE_ELEMENTS
    kernel = not per_node and use_kernel and grid.dtype == jnp.float32
    # What the points read, made once for every chunk of them.
    packs = tpu_kernels.packs(taps)
    if kernel and packs and tpu_kernels.fits(packed_table_rows(batch, ext.shape[1:], k)):
        packed = packed_tap_table(ext, k)

        def read(axes, cell, weights):
            row, sub = packed_position([a[0] for a in axes], ext.shape[1:], k)
            lanes = [x.reshape(-1, tpu_kernels.LANES) for x in (row, sub)]
            taps_read = tpu_kernels.gather_packed_lanes(packed, taps, *lanes)
            return jnp.sum(taps_read.reshape(weights.shape) * weights, axis=0)

    elif kernel and (chunks := _patch_chunks(ext.shape, k)):
        parts = [_PatchChunk(ext.shape, k, chunk) for chunk in chunks]
        tables = [part.table(ext) for part in parts]

        def read(axes, cell, weights):
            weights = weights.reshape(taps, -1)
            values: list = []  # after each chunk
            for part, table in zip(parts, tables):
                row, lane, inside = part.position(axes, batch)
                part_rows = tpu_kernels.gather_patches(table, row, lane, part.offsets, k)
                part_values = jnp.sum(part_rows * weights, axis=0)
                # Each point lies in one chunk: the first one's values stand for the rest.
                values.append(jnp.where(inside, part_values, values[-1]) if values else part_values)
            return values[-1].reshape(cell.shape)

    elif whole:
        table = jax.vmap(lambda e: tap_table(e, k), out_axes=1)(ext).reshape(taps, -1)

        def read(axes, cell, weights):
            return jnp.sum(_gather(table, cell) * weights, axis=0)

    elif slabs and slab_taps <= MAX_GATHER_TAPS:
        slab_table = _slab_table(ext, k)

        def read(axes, cell, weights):
            first_node = axes[0][0].reshape(-1)
            rows = _slab_rows(slab_table, ext.shape, k, first_node, cell.reshape(-1), cells)
            return jnp.sum(rows * weights.reshape(taps, -1), axis=0).reshape(cell.shape)

    else:  # one gather per node, from the extended grids
        flat = ext.reshape(-1)
        ext_strides = np.cumprod([1, *ext.shape[:0:-1]])[:-1][::-1]
        size = math.prod(ext.shape[1:])

        def read(axes, cell, weights):
            firsts = [a[0] for a in axes]
            element = _element_index(firsts[0])
            values = jnp.zeros(cell.shape, grid.dtype)
            for t, offset in enumerate(itertools.product(range(k + 1), repeat=ndim)):
                index = sum((f + o) * int(s) for f, o, s in zip(firsts, offset, ext_strides))
                index = index + element * size
                values = values + weights[t] * jnp.take(flat, index, mode="clip")
            return values

    def values_of(cs):
        points = cs[0].shape[-1]
        # Zeros pad the points to whole lane rows: points inside, values dropped.
        lanes = [tpu_kernels.lane_rows(c) for c in cs]
        axes, cell, weights, nan = _geometry(ext.shape, lanes, k, mode, derivative, grid.shape)
        values = read(axes, cell, weights)
        # The kernels read node 0 with a NaN weight: its cotangent is NaN too
        # (NaN only on those points: elsewhere it would reach every cotangent).
        first = _first_node(grid).reshape(batch, *[1] * (values.ndim - 1))
        nan_weight = jnp.where(nan, jnp.asarray(jnp.nan, values.dtype), 0)
        values = jnp.where(nan, nan_weight * first, values)
        return values.reshape(batch, math.prod(values.shape[1:]))[:, :points]

    return _over_point_chunks(values_of, coords, taps)


# -- the points, chunk by chunk ---------------------------------------------

#: The most elements of a chunk of points' (taps, points) arrays (the
#: kernels' rows, the tap weights): 256 MiB of float32, so that memory
#: beyond the points' own arrays, and the program, do not grow with them.
CHUNK_ELEMENTS = 1 << 26
#: The points a chunk takes where their count is symbolic (jax.export): the
#: program cannot compare it with a block of points, and runs whole chunks
#: (a few points cost one chunk).
SYMBOLIC_CHUNK_POINTS = 1 << 16


def _point_chunking(points, taps: int) -> tuple | None:
    """(chunks, points a chunk) to read `points` points of `taps` taps in,
    or None: at once."""
    if not isinstance(points, int):
        size = SYMBOLIC_CHUNK_POINTS
        return (points + size - 1) // size, size
    most = max(tpu_kernels.BLOCK_POINTS, 1 << ((CHUNK_ELEMENTS // taps).bit_length() - 1))
    if points <= most:
        return None
    count = -(-points // most)
    block = tpu_kernels.BLOCK_POINTS
    return count, -(-points // (count * block)) * block  # evened out, whole blocks


def _chunked(arrays, chunking):
    """Arrays (rows, points) as (chunks, rows, points a chunk), padded with zeros."""
    count, size = chunking
    chunked = []
    for a in arrays:
        rows, points = a.shape
        # Held as an array of its own: XLA on a TPU compiles the padding and
        # split of a reshaped image-shaped (H, W) array in time growing with
        # the points (60 s for 4096 x 4096 on a v5e), a materialized flat one
        # in a second.
        a = lax.optimization_barrier(a)
        a = jnp.pad(a, ((0, 0), (0, count * size - points)))
        chunked.append(jnp.moveaxis(a.reshape(rows, count, size), 1, 0))
    return chunked


def _over_point_chunks(fn, coords, taps: int):
    """fn (coordinates (rows, points) per axis -> values (rows, points)) on
    the points chunk by chunk (_point_chunking)."""
    rows, points = coords[0].shape
    chunking = _point_chunking(points, taps)
    if chunking is None:
        return fn(coords)
    values = lax.map(fn, _chunked(coords, chunking))  # (chunks, rows, points a chunk)
    count, size = chunking
    # Materialized before any reshape back to the points' shape (see _chunked).
    return lax.optimization_barrier(
        jnp.moveaxis(values, 0, 1).reshape(rows, count * size)[:, :points]
    )


def _summed_over_point_chunks(fn, arrays, taps: int):
    """fn (arrays (rows, points) -> arrays of any shape) summed over the
    chunks of the points (_point_chunking); padding must add nothing."""
    chunking = _point_chunking(arrays[0].shape[-1], taps)
    if chunking is None:
        return fn(arrays)
    chunks = _chunked(arrays, chunking)
    shapes = jax.eval_shape(fn, [c[0] for c in chunks])
    zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
    add = lambda total, chunk: (jax.tree.map(jnp.add, total, fn(chunk)), None)
    return lax.scan(add, zeros, chunks)[0]


def _batched(fn, grid, coords, ndim: int):
    """fn on the kernels' layout: grid (*batch, *spatial), coordinates
    (*batch, points), batch dimensions of 1 broadcasting; fn takes one
    batch dimension."""
    batch = lax.broadcast_shapes(grid.shape[: grid.ndim - ndim], coords[0].shape[:-1])
    spatial, points = grid.shape[grid.ndim - ndim :], coords[0].shape[-1]
    cs = [jnp.broadcast_to(c, (*batch, points)) for c in coords]
    if math.prod(grid.shape[: grid.ndim - ndim]) == 1:  # one grid: all points at once
        width = _lane_width(cs[0].shape)
        values = fn(grid.reshape(1, *spatial), [_one_run(c, width) for c in cs])
        # Materialized before the reshape back to the points' shape: on a
        # v5e the coordinate gradient at (2, 1024, 1024) points compiled in
        # 3.0 s so, 4.1 s without (one run each; compile times there vary
        # by about 0.5 s run to run).
        values = lax.optimization_barrier(values).reshape(*batch, width)
        return values[..., :points]
    g = jnp.broadcast_to(grid, (*batch, *spatial)).reshape(-1, *spatial)
    return fn(g, [c.reshape(-1, points) for c in cs]).reshape(*batch, points)


def _lane_width(shape) -> int | object:
    """The width rows of points (*rows, points) run at as one flat run: their
    own, or where there are several rows, the next multiple of 128 lanes if
    that adds at most an eighth more points. Measured on a v5e,
    first calls at (2, 1024, 1000) points on 1024^2: flattened as they are,
    order 1 compiled in 4.4 s (jax's own 1.8 s); padded to 1024, in 2.4 s, as
    at (2, 1024, 1024)."""
    *rows, points = shape
    if not rows or not all(isinstance(d, int) for d in shape) or math.prod(rows) == 1:
        return points
    width = -(-points // tpu_kernels.LANES) * tpu_kernels.LANES
    return width if 8 * (width - points) <= points else points


def _one_run(x, width):
    """Rows of points (*rows, points) as one flat run (1, rows * width),
    each row padded with zeros to `width` (coordinate 0 is a point inside,
    and a cotangent of 0 adds nothing)."""
    if width != x.shape[-1]:
        x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, width - x.shape[-1])])
    return x.reshape(1, -1)


def _varying_as(x, like):
    """x, varying over the mesh axes any array of `like` (a pytree) varies
    over: inside jax.shard_map (check_vma=True) a cotangent pulled back to x
    must have x's type."""
    axes = set().union(*(jax.typeof(a).manual_axis_type.varying for a in jax.tree.leaves(like)))
    return lax.pcast(x, tuple(sorted(axes)), to="varying") if axes else x


def _empty(shape) -> bool:
    """Whether an array of `shape` holds no element (a symbolic dimension,
    jax.export's, is at least 1)."""
    return any(isinstance(d, int) and d == 0 for d in shape)


def _known_grid(shape) -> None:
    """The grid's shape sizes its tables: it must be known when the program is lowered."""
    if not all(isinstance(d, int) for d in shape):
        raise NotImplementedError(
            "xlabind.ops.map_coordinates on a TPU: the grid's shape must be known when the "
            f"program is lowered (its tables are made for it); got {shape}, symbolic. "
            "Symbolic point counts work."
        )


def _split(x) -> tuple:
    """x's (an array's or a type's) PartitionSpec entries under Explicit
    mesh axes, one a dimension (None: whole)."""
    typ = x if isinstance(x, jax.core.ShapedArray) else jax.typeof(x)
    spec = tuple(getattr(typ.sharding, "spec", None) or ())
    return spec + (None,) * (len(typ.shape) - len(spec))


def _aligned(shape, split: tuple) -> tuple:
    """The split of an array of `shape` that broadcasts (aligned at the
    right) against one split as `split`: whole along its dimensions of 1."""
    if len(shape) > len(split):
        split = (None,) * (len(shape) - len(split)) + split
    split = split[len(split) - len(shape) :]
    return tuple(None if d == 1 else e for d, e in zip(shape, split))


def _axes_of(split: tuple) -> set:
    """The mesh axes a split names."""
    return {a for e in split if e is not None for a in ((e,) if isinstance(e, str) else e)}


def _on_each_device(fn, operands, operand_splits, result_split, summed_axes=()):
    """fn on each device's part of `operands` (split as `operand_splits`,
    resharded to them first) under Explicit mesh axes: Pallas cannot index a
    ref split across devices by a scalar, and lowers a kernel for a TPU
    only inside a shard_map over every mesh axis. The results are split as
    `result_split`, after a sum over `summed_axes` (a scatter's parts)."""
    P = PartitionSpec
    operands = [jax.sharding.reshard(x, P(*s)) for x, s in zip(operands, operand_splits)]

    def local(*parts):
        result = fn(*parts)
        return lax.psum(result, tuple(sorted(summed_axes))) if summed_axes else result

    # check_vma=False: the kernels' interpreter (jax 0.10) mistypes loops
    # whose operands vary across the mesh.
    return jax.shard_map(
        local,
        in_specs=tuple(P(*s) for s in operand_splits),
        out_specs=P(*result_split),
        check_vma=False,
    )(*operands)


def _explicit_axes() -> bool:
    mesh = jax.sharding.get_abstract_mesh()
    return not mesh.empty and bool(mesh.explicit_axes)


def map_coordinates_gather(grid, *coords, result_avals=None, **params):
    """xlabind_map_coordinates: (grid, coordinates...) -> values."""
    if result_avals is None or not _explicit_axes():
        return [_values(grid, *coords, **params)]
    (values_aval,) = result_avals
    split = _split(values_aval)  # (*batch, points): each device its points
    ndim = len(coords)
    # Each device's grids (a vmapped batch of them split as the values'), whole.
    grid_split = _aligned(grid.shape[: grid.ndim - ndim], split[:-1]) + (None,) * ndim
    splits = [grid_split, *(_aligned(c.shape, split) for c in coords)]
    values = _on_each_device(lambda *a: _values(*a, **params), [grid, *coords], splits, split)
    return [values]


def map_coordinates_scatter(*args, result_avals, **params):
    """xlabind_map_coordinates_transpose: (coordinates..., cotangents) -> the
    grid's cotangent: the kernels' scatter where the table fits, else the
    derivative in the grid of one gather per node."""
    grid_cotangent = functools.partial(_grid_cotangent, **params)
    if not _explicit_axes():
        return [grid_cotangent(*args, result_avals=result_avals)]
    *coords, cotangent = args
    (grid_aval,) = result_avals
    split = _split(cotangent)
    ndim = len(coords)
    lead = grid_aval.shape[: len(grid_aval.shape) - ndim]
    grid_split = _aligned(lead, split[:-1]) + (None,) * ndim
    # Each device adds its points into its grids; the devices holding other
    # points of the same grids add theirs.
    summed = _axes_of(split) - _axes_of(grid_split)
    splits = [*(_aligned(c.shape, split) for c in coords), split]
    local_shape = tuple(d // _devices(e) for d, e in zip(grid_aval.shape, grid_split))
    local_aval = jax.core.ShapedArray(local_shape, grid_aval.dtype)
    result = _on_each_device(
        lambda *a: grid_cotangent(*a, result_avals=[local_aval]), args, splits, grid_split, summed
    )
    return [jax.sharding.reshard(result, PartitionSpec(*_split(grid_aval)))]


def _devices(entry) -> int:
    """How many devices a PartitionSpec entry splits a dimension across."""
    mesh = jax.sharding.get_abstract_mesh()
    axes = () if entry is None else ((entry,) if isinstance(entry, str) else entry)
    return math.prod(mesh.shape[a] for a in axes)


def _values(grid, *coords, order, mode, derivative, **_):
    """The gather on the arrays it is given (one device's, or all)."""
    ndim = len(coords)
    _known_grid(grid.shape)
    batch = lax.broadcast_shapes(grid.shape[: grid.ndim - ndim], coords[0].shape[:-1])
    if _empty((*batch, coords[0].shape[-1], *grid.shape)):
        # No point, or nothing to read (the kernels' blocks would be empty).
        return jnp.zeros((*batch, coords[0].shape[-1]), grid.dtype)
    fn = functools.partial(
        _interpolate,
        order=int(order),
        mode=int(mode),
        derivative=tuple(derivative),
        use_kernel=True,
    )
    return _batched(fn, grid, list(coords), len(coords))


def _grid_cotangent(*args, order, mode, derivative, result_avals, **_):
    """The scatter on the arrays it is given (one device's, or all)."""
    *coords, cotangent = args
    (grid_aval,) = result_avals
    _known_grid(grid_aval.shape)
    if _empty((*cotangent.shape, *grid_aval.shape)):
        return jnp.zeros(grid_aval.shape, grid_aval.dtype)
    through_kernel = _kernel_scatter_batched(
        grid_aval, list(coords), cotangent, int(order), int(mode), tuple(derivative)
    )
    if through_kernel is not None:
        return through_kernel
    # A scatter-add per node, as jax's own map_coordinates: the table's
    # derivative, a scatter into a table of every cell's taps, measured 0.8x
    # jax at 256^3.
    fn = functools.partial(
        _interpolate,
        order=int(order),
        mode=int(mode),
        derivative=tuple(derivative),
        use_kernel=False,
        per_node=True,
    )
    zeros = _varying_as(jnp.zeros(grid_aval.shape, grid_aval.dtype), [*coords, cotangent])
    _, pullback = jax.vjp(lambda g: _batched(fn, g, list(coords), len(coords)), zeros)
    (grid_cotangent,) = pullback(cotangent.astype(grid_aval.dtype))
    return grid_cotangent


def _kernel_scatter_batched(grid_aval, coords, cotangent, order, mode, derivative):
    """_kernel_scatter for the kernels' layout: only one grid (its batch
    dimensions all 1: coordinates of several dimensions are rows over one
    grid), whose points are every row's, as one flat run."""
    ndim = len(coords)
    spatial = grid_aval.shape[grid_aval.ndim - ndim :]
    if math.prod(grid_aval.shape[: grid_aval.ndim - ndim]) != 1:
        return None
    width = _lane_width(cotangent.shape)
    cs = [_one_run(jnp.broadcast_to(c, cotangent.shape), width) for c in coords]
    result = _kernel_scatter(
        (1, *spatial),
        grid_aval.dtype,
        cs,
        _one_run(cotangent, width),  # the padding's points add nothing
        order,
        mode,
        derivative,
    )
    return None if result is None else result.reshape(grid_aval.shape)
