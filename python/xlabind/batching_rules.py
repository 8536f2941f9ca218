"""The vmap rule of the `xlabind_callback` primitive: one function per vmap_method.

A batch dimension of None means "not batched" (jax's not_mapped).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def batch_rule(args, dims, *, callback, **params):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    method = callback.vmap_method
    if method == "native" and not callback.has_shape_function:
        method = "sequential"  # a derived function without a batch-aware shape function
    return _METHODS[method](size, args, dims, callback, params)


def _sequential(size, args, dims, callback, params):
    from xlabind.callback_primitive import callback_p

    mapped = [i for i, d in enumerate(dims) if d is not None]
    moved = [jnp.moveaxis(args[i], dims[i], 0) for i in mapped]

    def one(xs):
        operands = list(args)
        for i, x in zip(mapped, xs):
            operands[i] = x
        return callback_p.bind(*operands, callback=callback, **params)

    outs = jax.lax.map(one, moved)
    return outs, [0] * len(outs)


def _leading_batch(size, args, dims, callback, params, broadcast):
    from xlabind.callback_primitive import callback_p

    operands = []
    for i, (a, d) in enumerate(zip(args, dims)):
        # A differentiable argument is broadcast even under expand_dims: its
        # cotangent then has the batch size, and jax sums it back.
        differentiable = callback.rules is not None and i not in callback.nondiff_argnums
        if d is None:
            a = jnp.broadcast_to(a, (size, *a.shape)) if broadcast or differentiable else a[None]
        else:
            a = jnp.moveaxis(a, d, 0)
        operands.append(a)
    avals = tuple(jax.core.ShapedArray((size, *av.shape), av.dtype)
                  for av in params["result_avals"])
    outs = callback_p.bind(*operands, callback=callback, **{**params, "result_avals": avals})
    return outs, [0] * len(outs)


def _shifted(entry: tuple, axis: int) -> tuple:
    """A batch-axes entry after vmap inserted a new axis at `axis`."""
    return tuple(b + 1 if b >= axis else b for b in entry) + (axis,)


def _native(size, args, dims, callback, params):
    from xlabind.callback_primitive import callback_p

    old = params["batch_axes"] or ((),) * len(args)
    new = tuple(entry if d is None else _shifted(entry, d)
                for entry, d in zip(old, dims))
    avals, _, out_axes = callback.result_avals(args, params["static_kwargs"], batch_axes=new)
    if len(avals) != len(params["result_avals"]):
        raise TypeError(f"{callback.name}: under vmap the result shape function returned "
                        f"{len(avals)} results, expected {len(params['result_avals'])}")
    for j, axis in enumerate(out_axes):
        if not isinstance(axis, int):
            raise TypeError(
                f"{callback.name}: vmap_method='native' needs every result's batch axis: under "
                f"vmap (batch_axes={new}) the result shape function must return "
                f"xlabind.BatchedResult(shape, dtype, batch_axis) leaves; result {j} has "
                f"batch_axis={axis!r}")
    old_out = params["out_batch_axes"] or ((),) * len(avals)
    new_out = tuple(_shifted(entry, axis) for entry, axis in zip(old_out, out_axes))
    outs = callback_p.bind(*args, callback=callback, **{
        **params, "result_avals": avals, "batch_axes": new, "out_batch_axes": new_out})
    return outs, list(out_axes)


_METHODS = {
    "sequential": _sequential,
    "expand_dims": lambda *a: _leading_batch(*a, broadcast=False),
    "broadcast_all": lambda *a: _leading_batch(*a, broadcast=True),
    "native": _native,
}
