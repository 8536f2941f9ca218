"""The vmap rule of the `xlabind_call` primitive: one function per vmap_method.

Aliases (an argument and a result sharing a buffer) are kept under every
method: a function may read the aliased result as the argument's values (an
in-place ``out += y``), so the argument is laid out as the result is — an
unbatched one broadcast to the batch under "expand_dims", moved or given the
result's batch axis under "native" — and a call that would still lose one is
an error, never a result read from uninitialised memory.
Under "sequential" each element's call is the unbatched one, aliases and all.
An ordered effect cannot be batched, as jax's ordered io_callback cannot.

A batch dimension of None means "not batched" (jax's not_mapped).

Under ``"native"`` a call records, per operand and per result, one entry per
vmap level (innermost first): the axis that level added, or None where the
array is not batched at that level. That is what the bound function receives
as ``batch_axes``, so two nested vmaps over different arguments can never
look like one vmap over both.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.interpreters import batching

from xlabind._primitive.explicit_sharding import explicit_axes
from xlabind._primitive.factors import insert_factor, new_factor
from xlabind._primitive.primitive import PRIMITIVES, Call, bind


def batch_rule(args, dims, *, call: Call):
    op = call.fn
    if op.effect == "ordered":
        # As jax refuses for ordered io_callbacks: a batch of calls has no one
        # order (expand_dims would make one call of many, sequential reorder them).
        raise ValueError(
            f"{op.name} has effect='ordered', so it cannot be batched with "
            f"jax.vmap: a batch of its calls has no program order. Use a Python "
            f"loop, or effect='unordered'."
        )
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    method = op.vmap_method
    if method == "native" and not op.has_shape_function:
        method = "sequential"  # a derived function without a batch-aware shape function
    return _METHODS[method](size, list(args), list(dims), op, call)


def _sequential(size, args, dims, op, call):
    mapped = [i for i, d in enumerate(dims) if d is not None]
    for i in mapped:
        axes = explicit_axes(jax.typeof(args[i]))
        if axes is not None and axes[dims[i]] is not None:
            # jax.lax.map would refuse it, naming neither the function nor a way out.
            raise ValueError(
                f"{op.name}: vmap_method='sequential' calls the function once per "
                f"batch element, on whole elements, but argument {i}'s batch axis is "
                f"split over Explicit mesh axes {axes[dims[i]]}. Use "
                f"vmap_method='expand_dims' or 'broadcast_all' (with a sharding_rule, "
                f"the batch is then split as the argument is), or gather the batch "
                f"first with jax.sharding.reshard."
            )
    moved = [jnp.moveaxis(args[i], dims[i], 0) for i in mapped]

    def one(xs):
        operands = list(args)
        for i, x in zip(mapped, xs):
            operands[i] = x
        return bind(call, operands)

    outs = jax.lax.map(one, moved)
    return outs, [0] * len(outs)


def _leading_batch(size, args, dims, op, call, broadcast):
    # A JVP's primal is laid out like its tangent (jax.jacfwd batches the
    # tangent only), so a JVP sees the two with the same shape.
    _align_pairs(size, args, dims, op, call)
    operands = []
    batch = new_factor(call.factors, call.out_factors)
    factors = []
    # An argument the function is linear in is broadcast even under expand_dims:
    # transposing gives its cotangent the batch size, and jax sums it back;
    # unless the function's transposes do that sum themselves.
    linear = set()
    if op.rules and not op.linear_broadcasts:
        linear = {i for group in op.rules.groups(len(args)) for i in group}
    aliased = {i for i, _ in call.aliases}
    batched = []
    for i, (a, d) in enumerate(zip(args, dims)):
        leading = batch
        if d is None:
            if broadcast or i in linear or i in aliased:
                a = jnp.broadcast_to(a, (size, *a.shape))
            else:
                a = a[None]
                leading = f"{batch}_one{i}"  # a size-1 axis: nothing to split
        else:
            a = jnp.moveaxis(a, d, 0)
        batched.append(leading == batch)
        operands.append(a)
        if call.factors is not None:
            factors.append((leading,) + call.factors[i])
    avals = tuple(jax.core.ShapedArray((size, *av.shape), av.dtype) for av in call.result_avals)
    changes = {"result_avals": avals, "aliases": _kept_aliases(op, call, operands, avals)}
    if not broadcast:
        # Which operands have a size-1 axis in place of the batch: a derivative
        # call (derived_layouts.py) is then made as under jax.vmap, summing a
        # cotangent over the batch for an argument that has none.
        earlier = call.expanded if call.expanded is not None else ((),) * len(args)
        changes["expanded"] = tuple(e + (b,) for e, b in zip(earlier, batched))
    if call.factors is not None:
        changes.update(
            factors=tuple(factors), out_factors=tuple((batch,) + f for f in call.out_factors)
        )
    outs = bind(call.replace(**changes), operands)
    return outs, [0] * len(outs)


def _with_level(entry: tuple, axis: int | None) -> tuple:
    """A batch-axes entry after a vmap level put its axis at `axis` (None: not batched)."""
    if axis is None:
        return entry + (None,)
    return tuple(b + 1 if b is not None and b >= axis else b for b in entry) + (axis,)


def _insert_axis(x, axis: int, size: int):
    return jnp.broadcast_to(jnp.expand_dims(x, axis), (*x.shape[:axis], size, *x.shape[axis:]))


def _align_pairs(size, args, dims, op, call):
    """Lays operand k out exactly like operand i for each of the op's aligned pairs
    (a JVP's tangent and its primal) and the call's (inherited from the call
    it derives from), broadcasting the unbatched one."""
    for i, k in op.aligned_pairs + call.aligned:
        if dims[i] == dims[k]:
            continue
        if dims[i] is None:
            args[i], dims[i] = _insert_axis(args[i], dims[k], size), dims[k]
        elif dims[k] is None:
            args[k], dims[k] = _insert_axis(args[k], dims[i], size), dims[i]
        else:
            args[k], dims[k] = jnp.moveaxis(args[k], dims[k], dims[i]), dims[i]


def _native(size, args, dims, op, call):
    _align_pairs(size, args, dims, op, call)
    n_levels = len(call.batch_axes[0]) if call.batch_axes else 0
    old = call.batch_axes if call.batch_axes is not None else ((),) * len(args)
    old_out = (
        call.out_batch_axes if call.out_batch_axes is not None else ((),) * len(call.result_avals)
    )
    new, avals, out_axes, new_out = _native_layout(size, args, dims, old, old_out, op, call)
    # An aliased argument laid out otherwise than its result takes the
    # result's batch axis (the shape function is asked again: it may answer
    # differently for the new layout).
    moved = False
    for i, j in call.aliases:
        if new[i] != new_out[j] and old[i] == old_out[j]:
            args[i] = (
                _insert_axis(args[i], out_axes[j], size)
                if dims[i] is None
                else jnp.moveaxis(args[i], dims[i], out_axes[j])
            )
            dims[i], moved = out_axes[j], True
    if moved:
        new, avals, out_axes, new_out = _native_layout(size, args, dims, old, old_out, op, call)
    assert all(len(e) == n_levels + 1 for e in new + new_out)
    # An alias needs the argument and the result to have their batch axes in
    # the same places: in one buffer, a handler that writes element by
    # element would otherwise overwrite what it has yet to read.
    aliases = _kept_aliases(op, call, args, avals, lambda i, j: new[i] == new_out[j])
    changes = dict(result_avals=avals, batch_axes=new, out_batch_axes=new_out, aliases=aliases)
    if call.factors is not None:  # the vmap axis is independent: it may be split too
        level = new_factor(call.factors, call.out_factors)
        changes.update(
            factors=tuple(insert_factor(f, d, level) for f, d in zip(call.factors, dims)),
            out_factors=tuple(
                insert_factor(f, a, level) for f, a in zip(call.out_factors, out_axes)
            ),
        )
    outs = bind(call.replace(**changes), args)
    return outs, out_axes


def _native_layout(size, args, dims, old, old_out, op, call):
    """Operands' and results' batch axes with this level's `dims`, the results'
    avals and this level's result axes, as the shape function answers them."""
    new = tuple(_with_level(entry, d) for entry, d in zip(old, dims))
    avals, _, out_axes = op.result_avals(args, call.kwargs, batch_axes=new)
    if len(avals) != len(call.result_avals):
        raise TypeError(
            f"{op.name}: under vmap the result shape function returned "
            f"{len(avals)} results, expected {len(call.result_avals)}"
        )
    out_axes = [
        _checked_batched_result(op, j, aval, axis, before, size, new)
        for j, (aval, axis, before) in enumerate(zip(avals, out_axes, call.result_avals))
    ]
    new_out = tuple(_with_level(entry, axis) for entry, axis in zip(old_out, out_axes))
    return new, avals, out_axes, new_out


def _kept_aliases(op, call, operands, avals, same_layout=lambda i, j: True):
    """The call's aliases, all of them: the function may read an aliased
    result as its argument, so losing one (a shape the batching rule could
    not make agree) is an error, not a silently uninitialised result."""
    kept = tuple((i, j) for i, j in call.matching_aliases(operands, avals) if same_layout(i, j))
    lost = [(i, j) for i, j in call.aliases if (i, j) not in kept]
    if lost:
        i, j = lost[0]
        raise ValueError(
            f"{op.name}: under jax.vmap (vmap_method={op.vmap_method!r}) argument {i} "
            f"(shape {tuple(operands[i].shape)}) and result {j} (shape "
            f"{tuple(avals[j].shape)}) no longer have one shape and batch layout, so "
            f"input_output_aliases={{{i}: {j}}} cannot hold. Return result {j} with the "
            f"argument's batch axis from the shape function, or drop the alias."
        )
    return kept


def _checked_batched_result(op, j, aval, axis, before, size, batch_axes) -> int:
    """The batch axis of result j, after checking that it describes a batch of
    the result one level down."""
    where = (
        f"{op.name}: under vmap (batch_axes={batch_axes}) the result shape function "
        f"returned for result {j}"
    )
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise TypeError(
            f"{where} batch_axis={axis!r}; vmap_method='native' needs every result's batch "
            f"axis: return xlabind.BatchedResult(shape, dtype, batch_axis) leaves"
        )
    ndim = len(aval.shape)
    if not -ndim <= axis < ndim:
        raise ValueError(
            f"{where} shape {aval.shape} with batch_axis={axis}, which is out of "
            f"range for {ndim} dimensions"
        )
    axis %= ndim
    unbatched = aval.shape[:axis] + aval.shape[axis + 1 :]
    if aval.shape[axis] != size or unbatched != before.shape or aval.dtype != before.dtype:
        raise ValueError(
            f"{where} shape {aval.shape} and dtype {aval.dtype} with batch_axis={axis}; "
            f"expected a batch of {size} along that axis of the unbatched result, which has "
            f"shape {before.shape} and dtype {before.dtype}"
        )
    return axis


_METHODS: dict[str, Callable[..., Any]] = {
    "sequential": _sequential,
    "expand_dims": functools.partial(_leading_batch, broadcast=False),
    "broadcast_all": functools.partial(_leading_batch, broadcast=True),
    "native": _native,
}

for _primitive in PRIMITIVES:
    batching.primitive_batchers[_primitive] = batch_rule
