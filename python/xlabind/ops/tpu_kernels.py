"""The Pallas TPU kernel behind xlabind.ops.map_coordinates on TPUs: each
point's row of the tap table (tpu_formulation.py), read from the chip's
vector memory.

Measured on a v5e (docs/guides/tpu.md): an XLA gather costs about 10 ns an
index; a gather inside a Pallas kernel works only within one vector register.
What is fast is a loop on the scalar unit that loads one 128-lane row at a
scalar index from vector memory (about 2 ns a row): the table is packed
128 // taps cells to a row and held whole in vector memory, each block of
points loads its rows, transposes them (points along lanes) and keeps each
point's own cell of its row. Off a TPU the same kernel runs interpreted (CI
checks its numbers there, not that the chip compiles it).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

#: Run the kernel interpreted off a TPU (tests set it; CPU programs never need it).
INTERPRET = False
#: The most vector memory (128 MiB on a v5e) a packed table may take: the
#: gather holds one copy of it, the scatter two (Pallas double-buffers outputs).
MAX_TABLE_BYTES = 64 << 20
MAX_SCATTER_TABLE_BYTES = 32 << 20
_LANES = 128
_BLOCK = 2048


def available() -> bool:
    """Whether the programs being lowered run the kernel: on a TPU, or interpreted."""
    return INTERPRET or jax.default_backend() == "tpu"


def fits(table, limit: int | None = None) -> bool:
    """Whether `table` (taps, cells) packs into rows the kernel holds (in
    `limit` bytes, else MAX_TABLE_BYTES)."""
    taps = table.shape[0]
    limit = MAX_TABLE_BYTES if limit is None else limit
    if taps > _LANES or _LANES % taps:
        return False
    return table.size * table.dtype.itemsize <= limit and table.dtype == jnp.float32


def _kernel(block: int, taps: int):
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    per_row = _LANES // taps

    def kernel(row_ref, sub_ref, table_hbm, out_ref, table_ref, rows_ref, copied):
        # One copy of the table, made before the first block (a BlockSpec'd
        # input would be double-buffered: half the table that fits).
        @pl.when(pl.program_id(0) == 0)
        def _():
            copy = pltpu.make_async_copy(table_hbm, table_ref, copied)
            copy.start()
            copy.wait()

        def load(i, carry):
            rows_ref[pl.ds(i, 1), :] = table_ref[pl.ds(row_ref[i], 1), :]
            return carry

        lax.fori_loop(0, block, load, 0, unroll=8)
        rows = rows_ref[...].T  # (lanes, points)
        sub = sub_ref[...]
        picked = jnp.zeros((taps, block), rows.dtype)
        for s in range(per_row):
            picked = picked + jnp.where(sub == s, rows[s * taps : (s + 1) * taps, :], 0)
        out_ref[...] = picked

    return kernel


def _packed_rows(cells: int, taps: int) -> int:
    """Rows of 128 lanes that hold `cells` cells of `taps` each, in whole tiles of 8."""
    rows = -(-cells // (_LANES // taps))
    return -(-rows // 8) * 8


def _point_blocks(cell, taps: int):
    """(points a block, points padded to whole blocks, each padded point's
    packed row, its cell's place in the row as (1, padded)): the operands
    both kernels take first."""
    points = cell.shape[0]
    block = _BLOCK if points >= _BLOCK else -(-points // _LANES) * _LANES
    padded = -(-points // block) * block
    cell = jnp.pad(cell, (0, padded - points))
    per_row = _LANES // taps
    return block, padded, cell // per_row, (cell % per_row).reshape(1, padded)


def _scatter_kernel(block: int, taps: int):
    from jax.experimental import pallas as pl

    per_row = _LANES // taps

    def kernel(row_ref, sub_ref, contribution_ref, out_ref, rows_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            out_ref[...] = jnp.zeros(out_ref.shape, out_ref.dtype)

        contribution = contribution_ref[...]  # (taps, points)
        sub = sub_ref[...]
        spread = [jnp.where(sub == s, contribution, 0) for s in range(per_row)]
        rows_ref[...] = jnp.concatenate(spread, axis=0).T  # (points, lanes)

        def add(i, carry):
            r = row_ref[i]
            out_ref[pl.ds(r, 1), :] = out_ref[pl.ds(r, 1), :] + rows_ref[pl.ds(i, 1), :]
            return carry

        lax.fori_loop(0, block, add, 0, unroll=8)

    return kernel


def scatter_rows(contribution, cell, cells: int):
    """(taps, cells): the transpose of gather_rows: contribution[:, p] added
    into column `cell[p]`, the points one after another (a cell's points
    add up in order; no two updates of a row race)."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    taps, points = contribution.shape
    rows = _packed_rows(cells, taps)
    block, padded, row, sub = _point_blocks(cell, taps)
    contribution = jnp.pad(contribution, ((0, 0), (0, padded - points)))  # adds zeros
    packed = pl.pallas_call(
        _scatter_kernel(block, taps),
        grid=(padded // block,),
        in_specs=[
            pl.BlockSpec((block,), lambda b: (b,), memory_space=pltpu.SMEM),
            pl.BlockSpec((1, block), lambda b: (0, b)),
            pl.BlockSpec((taps, block), lambda b: (0, b)),
        ],
        out_specs=pl.BlockSpec((rows, _LANES), lambda b: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((rows, _LANES), contribution.dtype),
        scratch_shapes=[pltpu.VMEM((block, _LANES), contribution.dtype)],
        compiler_params=pltpu.CompilerParams(
            vmem_limit_bytes=100 << 20, dimension_semantics=("arbitrary",)
        ),
        interpret=INTERPRET,
    )(row, sub, contribution)
    return packed.reshape(-1)[: cells * taps].reshape(cells, taps).T


def gather_rows(table, cell):
    """(taps, points): row `cell[p]` of `table` (cells, taps) for each point."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    cells, taps = table.shape
    rows = _packed_rows(cells, taps)
    packed = jnp.pad(table.reshape(-1), (0, rows * _LANES - table.size)).reshape(rows, _LANES)
    points = cell.shape[0]
    block, padded, row, sub = _point_blocks(cell, taps)
    out = pl.pallas_call(
        _kernel(block, taps),
        grid=(padded // block,),
        in_specs=[
            pl.BlockSpec((block,), lambda b: (b,), memory_space=pltpu.SMEM),
            pl.BlockSpec((1, block), lambda b: (0, b)),
            pl.BlockSpec(memory_space=pl.ANY),
        ],
        out_specs=pl.BlockSpec((taps, block), lambda b: (0, b)),
        out_shape=jax.ShapeDtypeStruct((taps, padded), table.dtype),
        scratch_shapes=[
            pltpu.VMEM((rows, _LANES), table.dtype),
            pltpu.VMEM((block, _LANES), table.dtype),
            pltpu.SemaphoreType.DMA,
        ],
        # Sequential blocks: the first one copies the table for the rest.
        compiler_params=pltpu.CompilerParams(
            vmem_limit_bytes=100 << 20, dimension_semantics=("arbitrary",)
        ),
        interpret=INTERPRET,
    )(row, sub, packed)
    return out[:, :points]
