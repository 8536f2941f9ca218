"""How a rule calls a derived function (a transpose, a JVP, a VJP) on arrays
laid out by its parent's native vmap levels.

A derived call's operands are the parent's arguments, results, or their
(co)tangents; each is laid out like the parent's array it stands for. Its
results must be laid out like the parent's arrays they stand for, too: a
cotangent of an argument that was not batched at some level must not be
batched there either (it is the sum over that level).

Rather than guess where the derived function puts its batch axes, the call is
rebuilt from the unbatched call, one `jax.vmap` per level with the levels'
axes: each level then goes through the derived function's own vmap rule
(native with its own result-shape function, or sequential), and jax moves
every result axis where the parent needs it. Levels at which no operand is
batched are skipped, and results are summed over levels the parent's array
does not have.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

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
    if parent.batch_axes is None or parent.out_batch_axes is None:
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
    table = {"arg": parent.batch_axes, "out": parent.out_batch_axes}
    in_axes = [table[kind][i] for kind, i in operand_entries]
    out_axes = [table[kind][j] for kind, j in result_entries]
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

    return call_under_levels(
        parent, unbatched, operands, operand_entries, result_avals, result_entries
    )


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
    operands laid out by `parent`'s native vmap levels (see the module docstring)."""
    if parent.batch_axes is None or parent.out_batch_axes is None:
        return list(unbatched(*operands))
    table = {"arg": parent.batch_axes, "out": parent.out_batch_axes}
    in_axes = [table[kind][i] for kind, i in operand_entries]
    out_axes = [table[kind][j] for kind, j in result_entries]
    fn = unbatched
    for level in range(len(parent.batch_axes[0]) if parent.batch_axes else 0):
        fn = _add_level(fn, level, in_axes, out_axes, result_avals)
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


def _add_level(fn, level, in_axes, out_axes, result_avals):
    ins = tuple(_position_at(level, axes) for axes in in_axes)
    outs = [_position_at(level, axes) for axes in out_axes]
    sizes = [
        aval.shape[axes[level]] if axes[level] is not None else None
        for aval, axes in zip(result_avals, out_axes)
    ]

    if all(a is None for a in ins):
        # Nothing is batched at this level: the results are the same for every
        # element; broadcast them where the parent's arrays have the level.
        def broadcast(*xs):
            results = fn(*xs)
            return [
                r
                if q is None
                else jnp.broadcast_to(jnp.expand_dims(r, q), (*r.shape[:q], size, *r.shape[q:]))
                for r, q, size in zip(results, outs, sizes)
            ]

        return broadcast

    mapped = jax.vmap(
        lambda *xs: list(fn(*xs)), in_axes=ins, out_axes=[0 if q is None else q for q in outs]
    )

    def batched(*xs):
        results = mapped(*xs)
        # A result the parent does not batch at this level is the transpose of a
        # broadcast: the sum over the level.
        return [r.sum(axis=0) if q is None else r for r, q in zip(results, outs)]

    return batched
