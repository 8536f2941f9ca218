"""JVP rules written in JAX (xlabind.traceable): how a rule is called on a
call's operands, under the call's native vmap levels; what it must return;
and the derivative it gives a linear function's transpose.

A rule ``jvp(*args, *tangents, **static_kwargs)`` receives one tangent per
argument it covers (None where the tangent is zero) and returns the
tangents of the results. For ``xlabind.nonlinear`` it covers every
differentiable argument; for ``xlabind.linear`` the arguments the function is
not linear in (its ``nondiff_argnums``), and it must be linear in the
function's linear arguments too. Then the transpose ``T(a; ct)`` of ``u ->
f(a; u)`` has the derivative in ``a`` that transposing the rule gives: its
tangent for ``da`` is the transpose of ``u -> jvp(a with u; da)`` applied to
``ct``, which JAX computes, so every order of derivative closes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp

from xlabind._primitive.derivatives import is_zero
from xlabind._primitive.derived_layouts import call_under_levels, without_axes
from xlabind._primitive.trees import interleave


class Traceable:
    """A derivative rule written in JAX, as :func:`xlabind.traceable` returns
    it; the ``jvp`` of :func:`xlabind.nonlinear` and :func:`xlabind.linear`
    may be one.

    Attributes:
      fn: The rule itself.

    Example:
      >>> import jax.numpy as jnp, xlabind
      >>> rule = xlabind.traceable(lambda x, t: jnp.cos(x) * t)
      >>> isinstance(rule, xlabind.Traceable), rule.fn(0.0, 2.0).item()
      (True, 2.0)
    """

    def __init__(self, fn: Callable):
        if not callable(fn):
            raise TypeError(f"xlabind.traceable: expected a function, got {type(fn).__name__}")
        self.fn = fn


def traceable(fn: Callable) -> Traceable:
    """Marks a JVP rule as written in JAX (jnp, lax, other bound functions): JAX
    traces it, differentiates it further and transposes it for reverse mode, so
    :func:`xlabind.nonlinear` then needs no ``vjp``.

    The rule is called as ``jvp(*args, *tangents, **static_kwargs)``, with
    ``None`` for tangents known to be zero, and returns the tangents of the
    results. It must be linear in the tangents. Under ``vmap_method="native"``
    it sees one element of the batch; under ``"expand_dims"`` or
    ``"broadcast_all"`` the batched arrays, batch axes in front (as the
    function itself does).

    Example:
      >>> import jax, jax.numpy as jnp, numpy as np, xlabind
      >>> sin = xlabind.nonlinear(np.sin, lambda x: x,
      ...                         jvp=xlabind.traceable(lambda x, t: jnp.cos(x) * t))
      >>> jax.grad(lambda x: sin(x).sum())(jnp.zeros(2)).tolist()
      [1.0, 1.0]
    """
    return Traceable(fn)


def flat_tangents(name: str, out, result_avals) -> list:
    """A rule's result as the flat list of tangents of `result_avals`, checked
    as jax.custom_jvp checks a rule's: one per result, of the result's shape
    (cast to the result's dtype, but never from complex to real)."""
    leaves = jax.tree_util.tree_leaves(out)
    if len(leaves) != len(result_avals):
        raise TypeError(
            f"{name}: the traceable jvp returned {len(leaves)} tangents, "
            f"expected {len(result_avals)} (one per result)"
        )
    tangents = []
    for j, (t, aval) in enumerate(zip(leaves, result_avals)):
        shape = tuple(jnp.shape(t))
        if shape != tuple(aval.shape):
            raise TypeError(
                f"{name}: the traceable jvp returned a tangent of shape {shape} "
                f"for result {j}, which has shape {tuple(aval.shape)}; a JVP rule "
                f"returns one tangent of each result's shape (as jax.custom_jvp "
                f"requires)"
            )
        dtype = jnp.result_type(t)
        if jnp.issubdtype(dtype, jnp.complexfloating) and not jnp.issubdtype(
            aval.dtype, jnp.complexfloating
        ):
            raise TypeError(
                f"{name}: the traceable jvp returned a complex tangent ({dtype}) "
                f"for result {j}, which is real ({aval.dtype})"
            )
        tangents.append(jnp.asarray(t, aval.dtype))
    return tangents


def _core_avals(avals, batch_axes) -> list:
    """`avals` without the native vmap levels' axes (one element's)."""
    if batch_axes is None:
        return list(avals)
    return [
        jax.core.ShapedArray(without_axes(a.shape, axes), a.dtype)
        for a, axes in zip(avals, batch_axes)
    ]


def traced_tangent(rule: Callable, covered: Sequence[int], primals, tangents, call) -> list:
    """The tangents of `call`'s results from `rule`, for the nonzero tangents of
    the arguments in `covered` (on every vmap level's elements, when the call
    is batched natively)."""
    n = len(primals)
    given = [i for i in covered if not is_zero(tangents[i])]
    kwargs = call.kwargs.as_dict()
    core = _core_avals(call.result_avals, call.out_batch_axes)

    def tangents_of(*xs):
        ts = dict(zip(given, xs[n:]))
        return flat_tangents(
            call.op.name, rule(*xs[:n], *(ts.get(i) for i in covered), **kwargs), core
        )

    return call_under_levels(
        call,
        tangents_of,
        [*primals, *(tangents[i] for i in given)],
        [("arg", i) for i in range(n)] + [("arg", i) for i in given],
        call.result_avals,
        [("out", j) for j in range(len(call.result_avals))],
    )


def transposed_tangent(rule: Callable, fixed: Sequence[int], primals, tangents, call) -> list:
    """The tangents of a transpose's results (`call`, with operands: the
    forward function's `fixed` arguments a, then the cotangents ct of its
    results) for the nonzero tangents da of a: the transpose, in the forward
    function's linear arguments u, of ``u -> rule(a with u; da)``, at ct."""
    k = len(fixed)
    given = [i for i in range(k) if not is_zero(tangents[i])]
    kwargs = call.kwargs.as_dict()
    core = _core_avals(call.result_avals, call.out_batch_axes)
    n = k + len(core)
    name = call.op.name

    def tangents_of(*xs):
        a, cts, das = xs[:k], xs[k : len(primals)], dict(zip(given, xs[len(primals) :]))

        def forward_tangents(*u):
            args = interleave(n, fixed, a, u)
            out = jax.tree_util.tree_leaves(rule(*args, *(das.get(i) for i in range(k)), **kwargs))
            if len(out) != len(cts):
                raise TypeError(
                    f"{name}: the traceable jvp returned {len(out)} tangents, "
                    f"expected {len(cts)} (one per result)"
                )
            return [jnp.asarray(t, ct.dtype) for t, ct in zip(out, cts)]

        transpose = jax.linear_transpose(
            forward_tangents, *[jax.ShapeDtypeStruct(aval.shape, aval.dtype) for aval in core]
        )
        return list(transpose(list(cts)))

    return call_under_levels(
        call,
        tangents_of,
        [*primals, *(tangents[i] for i in given)],
        [("arg", i) for i in range(len(primals))] + [("arg", i) for i in given],
        call.result_avals,
        [("out", j) for j in range(len(call.result_avals))],
    )
