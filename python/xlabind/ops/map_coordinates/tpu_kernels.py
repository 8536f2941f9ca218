"""The Pallas TPU kernel behind xlabind.ops.map_coordinates on TPUs: each
point's row of the tap table (tpu_formulation.py), read from the chip's
vector memory.

Measured on a v5e (docs/guides/tpu.md): an XLA gather costs about 10 ns an
index; a gather inside a Pallas kernel works only within one vector register.
What is fast is a loop on the scalar unit that loads one 128-lane row at a
scalar index from vector memory (about 2 ns a row): the table is packed
128 // taps cells to a row and held whole in vector memory, each block of
points loads its rows, transposes them (points along lanes) and keeps each
point's own cell of its row. Tables too large for vector memory are read
from the grid itself, cut into patches (below). Off a TPU the same kernel runs interpreted (CI
checks its numbers there, not that the chip compiles it).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax

from xlabind import _jax_internals

#: Run the kernels interpreted: the formulation is lowered only for TPU
#: programs, where the kernels are the chip's; tests that run it in CPU
#: programs (tests/support/tpu_lowering.py) set this, as no CPU lowers Mosaic.
INTERPRET = False
#: The most vector memory (128 MiB on a v5e) a packed table may take: the
#: gather holds one copy of it. The scatter's half was set when Pallas
#: double-buffered its sums as an output; it now holds one copy in scratch
#: (_accumulated), and a larger limit has not been measured on a chip.
MAX_TABLE_BYTES = 64 << 20
MAX_SCATTER_TABLE_BYTES = 32 << 20
#: The patch tables (below), held once by their gather and their scatter.
MAX_PATCH_TABLE_BYTES = 100 << 20
VMEM_LIMIT_BYTES = 120 << 20
LANES = 128
_LANE_BITS = 7  # log2(LANES)
#: The points a kernel's block takes (fewer where there are fewer).
BLOCK_POINTS = 2048


def packs(taps: int) -> bool:
    """Whether cells of `taps` taps pack whole into rows of 128 lanes."""
    return taps <= LANES and LANES % taps == 0


def fits(rows: int, limit: int | None = None) -> bool:
    """Whether a packed float32 table of `rows` rows of 128 lanes is one the
    kernels hold (in `limit` bytes, else MAX_TABLE_BYTES)."""
    return rows * LANES * 4 <= (MAX_TABLE_BYTES if limit is None else limit)


def _unroll() -> int:
    """How many points each turn of a kernel's point loop takes: 8 on the
    chip; one when interpreted, where the copies change no value and only
    give XLA more program to compile (a seventh of test_tpu_ops' compile time
    off a TPU)."""
    return 1 if INTERPRET else 8


def _load_rows(block, row_ref, table_hbm, table_ref, copied, stages, offsets):
    """In a gather kernel: the table copied into vector memory before the
    first block (one copy: a BlockSpec'd input would be double-buffered,
    half the table that fits), then row `row[i] + offset` of it into row i
    of the stage of each offset, point by point on the scalar unit."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    @pl.when(pl.program_id(0) == 0)
    def _():
        copy = pltpu.make_async_copy(table_hbm, table_ref, copied)
        copy.start()
        copy.wait()

    def load(i, carry):
        r = _point_row(row_ref, i)
        for stage, offset in zip(stages, offsets):
            stage[pl.ds(i, 1), :] = table_ref[pl.ds(r + offset, 1), :]
        return carry

    _points_loop(block, load)


def _kernel(block: int, taps: int):
    from jax.experimental import pallas as pl

    per_row = LANES // taps

    def kernel(row_ref, sub_ref, table_hbm, out_ref, table_ref, rows_ref, copied):
        _load_rows(block, row_ref, table_hbm, table_ref, copied, (rows_ref,), (0,))

        def lane_row(j, carry):
            # 128 points at a time, as they lie in the lane rows of the
            # operands and the result.
            start = pl.multiple_of(j * LANES, LANES)
            rows = rows_ref[pl.ds(start, LANES), :].T  # (lanes, points)
            sub = sub_ref[pl.ds(j, 1), :]
            picked = jnp.zeros((taps, LANES), rows.dtype)
            for s in range(per_row):
                picked = picked + jnp.where(sub == s, rows[s * taps : (s + 1) * taps, :], 0)
            for t in range(taps):
                out_ref[t, pl.ds(j, 1), :] = picked[t : t + 1, :]
            return carry

        _points_loop(block // LANES, lane_row)

    return kernel


def _blocking(points: int) -> tuple[int, int]:
    """(points a block, points padded to whole blocks)."""
    block = BLOCK_POINTS if points >= BLOCK_POINTS else -(-points // LANES) * LANES
    return block, -(-points // block) * block


def _point_specs(block: int) -> list:
    """The specs of the operands every kernel takes first: each point's row
    (read by the scalar unit) and its place in the row, by blocks of points.
    The rows are (points // 128, 128): Pallas checks a one-dimensional
    block against the chip it lowers on (jax's tpu_info), so that a TPU
    program exported on a machine without one would fail to lower."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    return [
        pl.BlockSpec((block // LANES, LANES), lambda b: (b, 0), memory_space=pltpu.SMEM),
        pl.BlockSpec((1, block), lambda b: (0, b)),
    ]


def _point_row(row_ref, i):
    """Point i's row, from the block's rows as _point_specs lays them out."""
    # Shifts and masks: the scalar unit's cheapest division by 128.
    lane_bits, mask = jnp.int32(_LANE_BITS), jnp.int32(LANES - 1)
    return row_ref[lax.shift_right_logical(i, lane_bits), lax.bitwise_and(i, mask)]


def _points_loop(count: int, body, unroll: int | None = None) -> None:
    """body(i, carry) for i in [0, count) in a kernel, i an int32 (as are
    _point_row's constants). Under jax_enable_x64 a loop over Python ints
    counts in int64, which Mosaic lowers as int32 and then refuses ("'arith.
    shrui' op requires the same type for all operands"), a conversion too:
    there the loop carries an int32 count of its own."""
    unroll = _unroll() if unroll is None else unroll
    if not _jax_internals.config_flag("jax_enable_x64"):
        lax.fori_loop(0, count, body, 0, unroll=unroll)
        return

    def step(_, i):
        body(i, 0)
        return i + 1

    lax.fori_loop(0, count, step, jnp.int32(0), unroll=unroll)


def _sequential(vmem_limit: int):
    """Blocks one after another (the first fills what the others read, or
    the last writes what all added), with `vmem_limit` bytes of vector memory."""
    from jax.experimental.pallas import tpu as pltpu

    return pltpu.CompilerParams(vmem_limit_bytes=vmem_limit, dimension_semantics=("arbitrary",))


def _result(shape, dtype, *operands) -> jax.ShapeDtypeStruct:
    """A kernel's result type, varying over the mesh axes its operands vary
    over: inside jax.shard_map (check_vma=True) Pallas asks for them."""
    varying = frozenset().union(*(jax.typeof(x).manual_axis_type.varying for x in operands))
    return jax.ShapeDtypeStruct(
        shape, dtype, manual_axis_type=jax.sharding.ManualAxisType(varying=varying)
    )


def _gather_call(
    kernel, blocks: int, point_specs, out_block, block: int, stages: int, vmem_limit: int, *args
):
    """A gather kernel on (row, place, table) -> its result, `blocks`
    blocks of `block` points read through `point_specs` (the row's and the
    place's), each writing `out_block` (taps first, then the points' axes:
    the result is those blocks one after another along axis 1); the table
    (rows, 128) copied once into vector memory by the first block, `stages`
    rows a point staged there."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    table = args[-1]
    taps, points, *rest = out_block
    return pl.pallas_call(
        kernel,
        grid=(blocks,),
        in_specs=[*point_specs, pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(out_block, lambda b: (0, b, *[0] * len(rest))),
        out_shape=_result((taps, blocks * points, *rest), table.dtype, *args),
        scratch_shapes=[
            pltpu.VMEM(table.shape, table.dtype),
            *[pltpu.VMEM((block, LANES), table.dtype) for _ in range(stages)],
            pltpu.SemaphoreType.DMA,
        ],
        compiler_params=_sequential(vmem_limit),
        interpret=INTERPRET,
    )(*args)


def _point_blocks(row, place):
    """(points a block, points padded to whole blocks, the rows and places
    padded and laid out as _point_specs reads them): the operands every
    kernel takes first."""
    points = row.shape[0]
    block, padded = _blocking(points)
    row = jnp.pad(row, (0, padded - points)).reshape(-1, LANES)
    return block, padded, row, jnp.pad(place, (0, padded - points)).reshape(1, padded)


def _accumulated(sums_ref, out_hbm, copied, blocks: int, add) -> None:
    """In a scatter kernel: the sums in vector memory zeroed before the
    first block, this block's add(), and one copy of the sums (a resident
    output block would be double-buffered) written out after the last."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    @pl.when(pl.program_id(0) == 0)
    def _():
        sums_ref[...] = jnp.zeros(sums_ref.shape, sums_ref.dtype)

    add()

    @pl.when(pl.program_id(0) == blocks - 1)
    def _():
        copy = pltpu.make_async_copy(sums_ref, out_hbm, copied)
        copy.start()
        copy.wait()


#: A scatter's sums lie in vector memory in pages of 2^13 rows: Mosaic on a
#: v5e compiled a kernel adding into one (rows, 128) buffer of more than 2^15
#: rows in 7 s (a 1024 x 1024 grid's tap table), paged in 1.2 s, as fast a call.
_PAGE_BITS = 13


def _scatter_kernel(block: int, taps: int, blocks: int):
    from jax.experimental import pallas as pl

    per_row = LANES // taps

    def kernel(row_ref, sub_ref, contribution_ref, out_hbm, sums_ref, rows_ref, copied):
        def add_block():
            def lane_row(j, carry):
                # 128 points at a time, from the lane rows of the operands.
                rows = [contribution_ref[t, pl.ds(j, 1), :] for t in range(taps)]
                contribution = jnp.concatenate(rows, axis=0)  # (taps, points)
                sub = sub_ref[pl.ds(j, 1), :]
                spread = [jnp.where(sub == s, contribution, 0) for s in range(per_row)]
                start = pl.multiple_of(j * LANES, LANES)
                rows_ref[pl.ds(start, LANES), :] = jnp.concatenate(spread, axis=0).T
                return carry

            _points_loop(block // LANES, lane_row)

            def add(i, carry):
                r = _point_row(row_ref, i)
                # int32 constants: a Python int is int64 under jax_enable_x64.
                page = lax.shift_right_logical(r, jnp.int32(_PAGE_BITS))
                within = lax.bitwise_and(r, jnp.int32((1 << _PAGE_BITS) - 1))
                at = (page, pl.ds(within, 1), slice(None))
                sums_ref[at] = sums_ref[at] + rows_ref[pl.ds(i, 1), :]
                return carry

            _points_loop(block, add)

        _accumulated(sums_ref, out_hbm, copied, blocks, add_block)

    return kernel


def _lane_blocks(*arrays):
    """(lane rows a block, lane rows padded to whole blocks, the arrays
    (..., lane rows, 128) padded with zeros to them)."""
    lane_rows = arrays[0].shape[-2]
    block_rows = min(BLOCK_POINTS // LANES, lane_rows)
    padded = -(-lane_rows // block_rows) * block_rows
    widths = lambda x: [(0, 0)] * (x.ndim - 2) + [(0, padded - lane_rows), (0, 0)]
    return block_rows, padded, [jnp.pad(x, widths(x)) for x in arrays]


def scatter_packed_lanes(contribution, row, sub, rows: int):
    """(rows, 128): the transpose of gather_packed_lanes: contribution[:, p]
    (taps, lane rows, 128) added into the taps of cell `sub[p]` of row
    `row[p]`, the points one after another (a cell's points add up in
    order; no two updates of a row race)."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    taps = contribution.shape[0]
    page = min(rows, 1 << _PAGE_BITS)
    pages = -(-rows // page)
    block_rows, padded, (row, sub, contribution) = _lane_blocks(row, sub, contribution)
    blocks = padded // block_rows
    spec = (block_rows, LANES)
    sums = (pages, page, LANES)
    packed = pl.pallas_call(
        _scatter_kernel(block_rows * LANES, taps, blocks),
        grid=(blocks,),
        in_specs=[
            pl.BlockSpec(spec, lambda b: (b, 0), memory_space=pltpu.SMEM),
            pl.BlockSpec(spec, lambda b: (b, 0)),
            pl.BlockSpec((taps, *spec), lambda b: (0, b, 0)),
        ],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        out_shape=_result(sums, contribution.dtype, row, sub, contribution),
        scratch_shapes=[
            pltpu.VMEM(sums, contribution.dtype),
            pltpu.VMEM((block_rows * LANES, LANES), contribution.dtype),
            pltpu.SemaphoreType.DMA,
        ],
        compiler_params=_sequential(100 << 20),
        interpret=INTERPRET,
    )(row, sub, contribution)
    return packed.reshape(pages * page, LANES)[:rows]


def scatter_packed_rows(contribution, row, sub, rows: int):
    """(rows, 128): scatter_packed_lanes for flat runs of points
    (contribution (taps, points))."""
    # The padding's contribution is zeros: it adds nothing.
    return scatter_packed_lanes(lane_rows(contribution), lane_rows(row), lane_rows(sub), rows)


def gather_packed_lanes(packed, taps: int, row, sub):
    """(taps, lane rows, 128): the taps of cell `sub[p]` of row `row[p]` of
    a packed table (rows of 128 lanes, 128 // taps cells of `taps` each),
    for each point p of `row` and `sub` (lane rows, 128), in their layout:
    XLA on a v5e compiled the arithmetic around a flat run of 2^20 points
    (1, 2^20) in 3.6 s, the same points as (8192, 128) in 1.3."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    rows = row.shape[0]
    block_rows, padded, (row, sub) = _lane_blocks(row, sub)
    block = block_rows * LANES
    spec = (block_rows, LANES)
    point_specs = [
        pl.BlockSpec(spec, lambda b: (b, 0), memory_space=pltpu.SMEM),
        pl.BlockSpec(spec, lambda b: (b, 0)),
    ]
    kernel = _kernel(block, taps)
    blocks = padded // block_rows
    out = _gather_call(
        kernel, blocks, point_specs, (taps, *spec), block, 1, 100 << 20, row, sub, packed
    )
    return out[:, :rows]


def gather_packed_rows(packed, taps: int, row, sub):
    """(taps, points): gather_packed_lanes for flat runs of points."""
    points = row.shape[0]
    out = gather_packed_lanes(packed, taps, *(lane_rows(x) for x in (row, sub)))
    return out.reshape(taps, -1)[:, :points]


def lane_rows(x):
    """Points (..., points) as lane rows (..., rows, 128), padded with
    zeros: the layout of a TPU's vector registers, in which XLA compiles the
    arithmetic on them nearly three times faster than on one long row
    (gather_packed_lanes)."""
    points = x.shape[-1]
    padded = -(-points // LANES) * LANES
    if padded != points:
        x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, padded - points)])
    return x.reshape(*x.shape[:-1], padded // LANES, LANES)


# -- patches: the grid itself, for tables too large to hold whole ------------
#
# A row of 128 lanes holds a patch of 8 x 16 nodes of a grid's first two
# axes at one node of the others, the patches overlapping by k nodes on
# each axis so that a point's (k + 1)^2 nodes of those axes lie in one
# patch: a point reads (k + 1)^(ndim - 2) rows, and the table takes about
# 1.3x the grid at order 1 (its tap table 8x). The other axes stay in rows,
# so that making the table moves no node within a row of its own: measured
# on a v5e at 256^3, 16-node patches cut out of the last axis took 12 ms.
_PATCH = (8, 16)


def patch_counts(shape, k: int) -> tuple[int, int]:
    """How many patches of order `k` cover the first two axes (sizes `shape`)."""
    (n0, n1), (p0, p1) = shape[:2], _PATCH
    return -(-(n0 - k) // (p0 - k)), -(-(n1 - k) // (p1 - k))


def patch_rows(lead: int, shape: tuple[int, ...], k: int) -> int:
    """The rows of the patch table of `lead` grids of `shape`."""
    return lead * math.prod(patch_counts(shape, k)) * math.prod(shape[2:])


def patch_table_bytes(lead: int, shape: tuple[int, ...], k: int) -> int:
    """The bytes of that patch table (float32 rows of 128 lanes)."""
    return patch_rows(lead, shape, k) * LANES * 4


def _runs_by_reshapes(x, axis: int, count: int, size: int, k: int):
    step = size - k
    chunks = -(-size // step)
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, (count + chunks - 1) * step - x.shape[axis])
    x = jnp.pad(x, widths)
    runs = []
    for c in range(chunks):
        shifted = lax.slice_in_dim(x, c * step, (c + count) * step, axis=axis)
        shifted = shifted.reshape(*x.shape[:axis], count, step, *x.shape[axis + 1 :])
        runs.append(lax.slice_in_dim(shifted, 0, min(step, size - c * step), axis=axis + 1))
    return jnp.concatenate(runs, axis=axis + 1)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3, 4))
def _overlapping(x, axis: int, count: int, size: int, k: int):
    """Axis `axis` of x cut into `count` runs of `size` nodes, each starting
    size - k after the previous one: (..., count, size, ...). Measured on a
    v5e at 256^3: strided slices make the runs fastest (2.4 ms, 4.3 by
    reshapes), the transpose of the reshapes sums them fastest (4.1 ms, 14
    for the strided slices')."""
    step = size - k
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, count * step + k - x.shape[axis])
    x = jnp.pad(x, widths)
    runs = [
        lax.slice_in_dim(x, offset, offset + (count - 1) * step + 1, step, axis)
        for offset in range(size)
    ]
    return jnp.stack(runs, axis=axis + 1)


def _overlapping_forward(x, axis, count, size, k):
    # The residual's shape is the operand's (its values are unused).
    return _overlapping(x, axis, count, size, k), jnp.zeros((0, *x.shape), x.dtype)


def _overlapping_backward(axis, count, size, k, operand, cotangent):
    zeros = jnp.zeros(operand.shape[1:], cotangent.dtype)
    _, pullback = jax.vjp(lambda y: _runs_by_reshapes(y, axis, count, size, k), zeros)
    return pullback(cotangent)


_overlapping.defvjp(_overlapping_forward, _overlapping_backward)


def patch_table(grids, k: int):
    """(patch_rows, 128): grids (lead, n0, n1, rest) cut into overlapping
    patches of their first two axes; a row per patch and node of the rest,
    the rest innermost."""
    lead, n0, n1, rest = grids.shape
    across, down = patch_counts((n0, n1), k)
    patches = _overlapping(grids, 1, across, _PATCH[0], k)  # (lead, across, 8, n1, rest)
    patches = _overlapping(patches, 3, down, _PATCH[1], k)  # (lead, across, 8, down, 16, rest)
    patches = patches.transpose(0, 1, 3, 5, 2, 4)
    return patches.reshape(lead * across * down * rest, LANES)


def patch_position(lead_index, c0, c1, rest_index, rest: int, k: int, counts: tuple[int, int]):
    """Each point's first patch row (lead_index its grid, c0 and c1 its first
    node on the first two axes, rest_index on the others, flat) and the lane
    of its first node in it."""
    step0, step1 = _PATCH[0] - k, _PATCH[1] - k
    across, down = counts
    j, m = c0 // step0, c1 // step1
    row = ((lead_index * across + j) * down + m) * rest + rest_index
    return row, (c0 - j * step0) * _PATCH[1] + (c1 - m * step1)


def _patch_offsets(k: int):
    return [a * _PATCH[1] + b for a in range(k + 1) for b in range(k + 1)]


def _patch_gather_kernel(block: int, offsets: tuple[int, ...], k: int):
    def kernel(row_ref, lane_ref, table_hbm, out_ref, table_ref, *scratch):
        stages, copied = scratch[:-1], scratch[-1]
        _load_rows(block, row_ref, table_hbm, table_ref, copied, stages, offsets)
        # Lane of each node relative to the point's first node, points along lanes.
        relative = lax.broadcasted_iota(jnp.int32, (LANES, block), 0) - lane_ref[...]
        # Written in one store: a store per tap took about 60% of the
        # kernel's interpreted lowering off a TPU, and a quarter of the first
        # call's compile on one (v5e, 64^3 order 5: 17.5 s against 13.0; the
        # same values, as fast).
        taps = {}
        for r, stage in enumerate(stages):
            patch = stage[...].T  # (lanes, points)
            for p, offset in enumerate(_patch_offsets(k)):
                picked = jnp.where(relative == offset, patch, 0)
                taps[p * len(stages) + r] = jnp.sum(picked, axis=0, keepdims=True)
        out_ref[...] = jnp.concatenate([taps[t] for t in range(len(taps))], axis=0)

    return kernel


def gather_patches(table, row, lane, offsets: tuple[int, ...], k: int):
    """((k + 1)^2 * len(offsets), points): the (k + 1)^2 nodes from lane
    `lane[p]` of row `row[p] + offset` of the patch table for each offset
    (innermost): a point's nodes in the grid's order when the offsets are
    the taps of its axes after the first two."""

    points = row.shape[0]
    block, padded, row, lane = _point_blocks(row, lane)
    taps = len(offsets) * (k + 1) ** 2
    kernel = _patch_gather_kernel(block, tuple(offsets), k)
    out = _gather_call(
        kernel,
        padded // block,
        _point_specs(block),
        (taps, block),
        block,
        len(offsets),
        VMEM_LIMIT_BYTES,
        row,
        lane,
        table,
    )
    return out[:, :points]


def _patch_scatter_kernel(block: int, offsets: tuple[int, ...], k: int, blocks: int):
    from jax.experimental import pallas as pl

    def kernel(row_ref, lane_ref, contribution_ref, out_hbm, sums_ref, *scratch):
        stages, copied = scratch[:-1], scratch[-1]

        def add_block():
            relative = lax.broadcasted_iota(jnp.int32, (LANES, block), 0) - lane_ref[...]
            for r, stage in enumerate(stages):
                spread = jnp.zeros((LANES, block), sums_ref.dtype)
                for p, offset in enumerate(_patch_offsets(k)):
                    value = contribution_ref[pl.ds(p * len(stages) + r, 1), :]
                    spread = spread + jnp.where(relative == offset, value, 0)
                stage[...] = spread.T  # (points, lanes)

            def add(i, carry):
                r = _point_row(row_ref, i)
                for stage, offset in zip(stages, offsets):
                    at = pl.ds(r + offset, 1)
                    sums_ref[at, :] = sums_ref[at, :] + stage[pl.ds(i, 1), :]
                return carry

            _points_loop(block, add)

        _accumulated(sums_ref, out_hbm, copied, blocks, add_block)

    return kernel


def scatter_patches(contribution, row, lane, offsets: tuple[int, ...], k: int, rows: int):
    """(rows, 128): the transpose of gather_patches: each point's taps added
    into its rows of a patch table of `rows` rows, the points one after another."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    taps, points = contribution.shape
    block, padded, row, lane = _point_blocks(row, lane)
    contribution = jnp.pad(contribution, ((0, 0), (0, padded - points)))  # adds zeros
    blocks = padded // block
    return pl.pallas_call(
        _patch_scatter_kernel(block, tuple(offsets), k, blocks),
        grid=(blocks,),
        in_specs=[
            *_point_specs(block),
            pl.BlockSpec((taps, block), lambda b: (0, b)),
        ],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        out_shape=_result((rows, LANES), contribution.dtype, row, lane, contribution),
        scratch_shapes=[
            pltpu.VMEM((rows, LANES), contribution.dtype),
            *[pltpu.VMEM((block, LANES), contribution.dtype) for _ in offsets],
            pltpu.SemaphoreType.DMA,
        ],
        compiler_params=_sequential(VMEM_LIMIT_BYTES),
        interpret=INTERPRET,
    )(row, lane, contribution)
