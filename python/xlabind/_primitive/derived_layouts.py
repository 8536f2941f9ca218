"""How a rule calls a derived function (a transpose, a JVP, a VJP) on arrays
laid out by its parent's native or expand_dims vmap levels.

A derived call's operands are the parent's arguments, results, or their
(co)tangents; each is laid out like the parent's array it stands for. Its
results must be laid out like the parent's arrays they stand for, too: a
cotangent of an argument that was not batched at some level must not be
batched there either (it is the sum over that level).

Rather than guess where the derived function puts its batch axes, the call is
rebuilt from the unbatched call, one `jax.vmap` per level with the levels'
axes: each level then goes through the derived function's own vmap rule
(native with its own result-shape function, expand_dims, or sequential), and
jax moves every result axis where the parent needs it. Levels at which no
operand is batched are skipped, and results are summed over levels the
parent's array does not have.

Under expand_dims an argument a level does not batch has a size-1 axis for
it: the rebuilt call takes the element without it, and a result standing for
that argument (its cotangent) is summed over the level back to size 1. So a
derived function sees, and returns, the same shapes whether `jax.vmap` was
applied outside the derivative or inside it: its results always have the
batch in front.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, TypeVar

import jax
import jax.numpy as jnp

from xlabind._primitive.factors import derived_factors
from xlabind._primitive.primitive import Call

# ("arg", i): the parent's argument i (or its tangent / cotangent);
# ("out", j): the parent's result j (or its tangent / cotangent).
Entry = tuple[str, int]


_T = TypeVar("_T")


def bind_derived(
    op,
    parent: Call,
    operands: Sequence[Any],
    operand_entries: Sequence[Entry],
    out_tree,
    result_avals: Sequence[jax.core.ShapedArray],
    result_entries: Sequence[Entry],
) -> list:
    """Calls `op` (a Definition) on `operands` and returns results with
    `result_avals`, laid out as `parent` lays out the arrays named by the entries."""
    factors = out_factors = None
    summed: tuple[str, ...] = ()
    whole: tuple[str, ...] = ()
    # The derived arrays keep the factors of what they stand for.
    if parent.factors is not None and parent.out_factors is not None:
        by_kind = {"arg": parent.factors, "out": parent.out_factors}
        factors = tuple(by_kind[kind][i] for kind, i in operand_entries)
        out_factors = tuple(by_kind[kind][j] for kind, j in result_entries)
        summed, whole = derived_factors(parent, factors, out_factors)
    aligned = _inherited_pairs(parent, operand_entries)
    levels = _levels(parent, expanded=True)
    if levels is None:
        return op.bind(
            operands,
            parent.kwargs,
            out_tree,
            result_avals,
            factors=factors,
            out_factors=out_factors,
            summed=summed,
            whole=whole,
            aligned=aligned,
        )
    in_axes = [levels.axes[kind][i] for kind, i in operand_entries]
    out_axes = [levels.axes[kind][j] for kind, j in result_entries]
    core_avals = [
        jax.core.ShapedArray(without_axes(aval.shape, axes), aval.dtype)
        for aval, axes in zip(result_avals, out_axes)
    ]
    if factors is not None and out_factors is not None:  # the vmap levels add theirs back
        factors = tuple(without_axes(f, axes) for f, axes in zip(factors, in_axes))
        out_factors = tuple(without_axes(f, axes) for f, axes in zip(out_factors, out_axes))
        # The levels' own factors are the vmaps' below (independent, or summed by them).
        in_operands = {f for array in factors for f in array}
        summed = tuple(f for f in summed if f in in_operands)
        whole = tuple(f for f in whole if f in in_operands | {f for a in out_factors for f in a})

    def unbatched(*xs):
        return op.bind(
            xs,
            parent.kwargs,
            out_tree,
            core_avals,
            factors=factors,
            out_factors=out_factors,
            summed=summed,
            whole=whole,
            aligned=aligned,
        )

    return _under_levels(levels, unbatched, operands, operand_entries, result_avals, result_entries)


def _inherited_pairs(parent: Call, operand_entries: Sequence[Entry]) -> tuple:
    """The parent's aligned pairs of arguments, at their positions among the
    derived call's operands (a kernel that needs its coordinate arrays laid
    out alike needs it in its transpose too)."""
    position = {entry: n for n, entry in enumerate(operand_entries)}
    pairs = []
    for i, k in parent.fn.aligned_pairs + parent.aligned:
        if ("arg", i) in position and ("arg", k) in position:
            pairs.append((position[("arg", i)], position[("arg", k)]))
    return tuple(pairs)


def call_under_levels(
    parent: Call,
    unbatched,
    operands: Sequence[Any],
    operand_entries: Sequence[Entry],
    result_avals,
    result_entries: Sequence[Entry],
) -> list:
    """`unbatched(*operands) -> results`, written for one element, applied to
    operands laid out by `parent`'s native vmap levels (see the module docstring).
    Under expand_dims the arrays come as they are: `unbatched` is JAX code
    (a traceable rule), whose broadcasting of a size-1 axis JAX transposes."""
    levels = _levels(parent, expanded=False)
    if levels is None:
        return list(unbatched(*operands))
    return _under_levels(levels, unbatched, operands, operand_entries, result_avals, result_entries)


class _Levels(NamedTuple):
    """The vmap levels of a parent call, per kind of entry ("arg", "out"), per
    array, per level (innermost first)."""

    #: How many levels.
    depth: int
    #: Where the level's axis sits in the array, or None where it has none.
    axes: dict[str, tuple[tuple[int | None, ...], ...]]
    #: Whether the level batches the array (else the axis, if any, has size 1).
    batched: dict[str, tuple[tuple[bool, ...], ...]]


def _levels(parent: Call, expanded: bool) -> _Levels | None:
    """`parent`'s native vmap levels, and with `expanded` its expand_dims
    levels, or None where it has none."""
    if parent.batch_axes is not None and parent.out_batch_axes is not None:
        axes = {"arg": parent.batch_axes, "out": parent.out_batch_axes}
        batched = {
            kind: tuple(tuple(a is not None for a in entry) for entry in table)
            for kind, table in axes.items()
        }
        return _Levels(len(parent.batch_axes[0]) if parent.batch_axes else 0, axes, batched)
    if not expanded or not parent.expanded:
        return None
    # Each expand_dims level put its axis in front of every operand and result;
    # an operand it does not batch has size 1 there, a result always the batch.
    depth = len(parent.expanded[0])
    front = tuple(depth - 1 - level for level in range(depth))
    n_results = len(parent.result_avals)
    return _Levels(
        depth,
        {"arg": (front,) * len(parent.expanded), "out": (front,) * n_results},
        {"arg": parent.expanded, "out": ((True,) * depth,) * n_results},
    )


def _under_levels(
    levels: _Levels,
    unbatched,
    operands: Sequence[Any],
    operand_entries: Sequence[Entry],
    result_avals,
    result_entries: Sequence[Entry],
) -> list:
    ins = [(levels.axes[kind][i], levels.batched[kind][i]) for kind, i in operand_entries]
    outs = [(levels.axes[kind][j], levels.batched[kind][j]) for kind, j in result_entries]
    fn = unbatched
    for level in range(levels.depth):
        fn = _add_level(fn, level, ins, outs, result_avals)
    return list(fn(*operands))


def without_axes(shape: Sequence[_T], axes: Sequence[int | None]) -> tuple[_T, ...]:
    drop = {a for a in axes if a is not None}
    return tuple(d for k, d in enumerate(shape) if k not in drop)


def _position_at(level: int, axes: tuple) -> int | None:
    """Where `level`'s axis sits in the array that has levels 0..level only."""
    own = axes[level]
    if own is None:
        return None
    return own - sum(1 for a in axes[level + 1 :] if a is not None and a < own)


def _add_level(fn, level, ins, outs, result_avals):
    """`fn` (arrays with levels below `level`) applied to arrays with `level` too;
    `ins` and `outs`: per operand and result, (axes, batched) over all levels."""
    positions = [_position_at(level, axes) for axes, _ in ins]
    mapped_axes = tuple(p if batched[level] else None for p, (_, batched) in zip(positions, ins))
    out_positions = [_position_at(level, axes) for axes, _ in outs]
    out_batched = [batched[level] for _, batched in outs]
    sizes = [
        aval.shape[axes[level]] if batched[level] else 1
        for aval, (axes, batched) in zip(result_avals, outs)
    ]

    def unexpanded(xs):
        # An operand with a size-1 axis (expand_dims) at a level that does not
        # batch it is the element itself there.
        return [
            x if p is None or m is not None else jnp.squeeze(x, p)
            for x, p, m in zip(xs, positions, mapped_axes)
        ]

    if all(a is None for a in mapped_axes):
        # Nothing is batched at this level: the results are the same for every
        # element; broadcast them where the parent's arrays have the level.
        def broadcast(*xs):
            results = fn(*unexpanded(xs))
            return [
                r
                if q is None
                else jnp.broadcast_to(jnp.expand_dims(r, q), (*r.shape[:q], size, *r.shape[q:]))
                for r, q, size in zip(results, out_positions, sizes)
            ]

        return broadcast

    mapped = jax.vmap(
        lambda *xs: list(fn(*xs)),
        in_axes=mapped_axes,
        out_axes=[0 if q is None else q for q in out_positions],
    )

    def batched(*xs):
        results = mapped(*unexpanded(xs))
        # A result the parent does not batch at this level is the transpose of a
        # broadcast: the sum over the level (kept as a size-1 axis under expand_dims).
        return [
            r if b else r.sum(axis=0 if q is None else q, keepdims=q is not None)
            for r, q, b in zip(results, out_positions, out_batched)
        ]

    return batched
