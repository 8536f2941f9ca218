"""`xlabind.nonlinear`: any function, with its JVP and VJP.

The JVP of f at x is the user's ``jvp(x; tangents)``, linear in the tangents,
and the user's ``vjp(x; cotangents)`` is declared its transpose; so forward
mode calls jvp, reverse mode calls vjp, and each is called once per use.

Higher derivatives differentiate jvp and vjp with respect to x. When they are
plain functions that is an error saying what to do; when they are xlabind
functions themselves (e.g. ``xlabind.nonlinear`` with derivatives of their
own), their own rules apply, so ``jax.hessian`` works.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from xlabind._trees import flat_results_tree
from xlabind.callback import Callback, ResultSpec, derived_vmap_method
from xlabind.derivative_rules import (LinearityRules, derived_batch_axes, instantiate,
                                      output_tangents)


class _Nonlinear:
    def __init__(self, fn, jvp, vjp, result_shape_dtypes, vjp_shape_dtypes, nondiff_argnums,
                 in_place, vmap_method, name):
        self.forward = Callback(fn, result_shape_dtypes, in_place=in_place, name=name,
                                vmap_method=vmap_method, nondiff_argnums=nondiff_argnums,
                                rules=LinearityRules(groups=lambda n: [],
                                                     params_tangent=self._tangent))
        self.jvp, self.vjp = jvp, vjp
        self.vjp_shape_dtypes = vjp_shape_dtypes
        self._derived: dict[Any, tuple[Callback, Callback]] = {}

    def _diff(self, n):
        return [i for i in range(n) if i not in self.forward.nondiff_argnums]

    def derived(self, n: int, out_tree) -> tuple[Callback, Callback]:
        """(jvp op, vjp op) for calls of f with n arguments and this result tree.

        jvp op: (*args, *tangents of diff args) -> tangents of f's results.
        vjp op: (*args, *cotangents of f's results) -> cotangents of diff args.
        Each is linear in its last group and the other's transpose.
        """
        key = (n, out_tree)
        if key in self._derived:
            return self._derived[key]
        fwd = self.forward

        def user_rules(user):
            if isinstance(user, Callback) and user.rules is not None:
                # Derivatives in the primals come from the user's own xlabind function.
                return lambda cb, primals, tangents, params: output_tangents(
                    user, primals, tangents, params)
            return None

        def as_fn(user):
            return user.fn if isinstance(user, Callback) else user

        def jvp_spec(*structs, batch_axes=None, **kw):
            # f's result shapes, from f's own arguments (the first n).
            extra = {"batch_axes": batch_axes[:n] if batch_axes else batch_axes} \
                if fwd.vmap_method == "native" else {}
            return fwd.result_shape_dtypes(*structs[:n], **kw, **extra)

        jvp_shapes = jvp_spec if fwd.has_shape_function else None
        jvp_op = Callback(
            as_fn(self.jvp), jvp_shapes,
            in_place=getattr(self.jvp, "in_place", fwd.in_place), name=f"{fwd.name} (jvp)",
            nondiff_argnums=fwd.nondiff_argnums,
            vmap_method=derived_vmap_method(fwd, jvp_shapes),
            rules=LinearityRules(groups=lambda n_j: [list(range(n, n_j))],
                                 transposes=[None if self.vjp is None else self._call_vjp],
                                 params_tangent=user_rules(self.jvp),
                                 missing_transpose_hint="Pass vjp= to xlabind.nonlinear."))
        vjp_op = None if self.vjp is None else Callback(
            as_fn(self.vjp), self.vjp_shape_dtypes,
            in_place=getattr(self.vjp, "in_place", fwd.in_place), name=f"{fwd.name} (vjp)",
            nondiff_argnums=fwd.nondiff_argnums,
            vmap_method=derived_vmap_method(fwd, self.vjp_shape_dtypes),
            rules=LinearityRules(groups=lambda n_v: [list(range(n, n_v))],
                                 transposes=[lambda *a: self._call_jvp_from_vjp(out_tree, *a)],
                                 params_tangent=user_rules(self.vjp)))
        self._derived[key] = (jvp_op, vjp_op)
        return jvp_op, vjp_op

    def _tangent(self, callback, primals, tangents, params):
        """f's output tangents: one call of the jvp op."""
        n = len(primals)
        diff = self._diff(n)
        jvp_op, _ = self.derived(n, params["out_tree"])
        operands = [*primals, *(instantiate(tangents[i], _aval(primals[i])) for i in diff)]
        batch_axes = derived_batch_axes(params, [("arg", i) for i in range(n)]
                                        + [("arg", i) for i in diff])
        return jvp_op.bind(operands, params["static_kwargs"], params["out_tree"],
                           params["result_avals"], batch_axes, params["out_batch_axes"])

    def _call_vjp(self, callback, outside, cts, group_avals, params):
        # The jvp op transposed in its tangents: outside = f's args, cts = per f result.
        n = len(outside)
        diff = self._diff(n)
        _, vjp_op = self.derived(n, params["out_tree"])
        batch_axes = derived_batch_axes(params, [("arg", i) for i in range(n)]
                                        + [("out", j) for j in range(len(cts))])
        out_batch = derived_batch_axes(params, [("arg", n + k) for k in range(len(diff))])
        return vjp_op.bind([*outside, *cts], params["static_kwargs"], flat_results_tree(len(diff)),
                           group_avals, batch_axes, out_batch)

    def _call_jvp_from_vjp(self, out_tree, callback, outside, cts, group_avals, params):
        # The vjp op transposed in its cotangents: the jvp op on (args, cts).
        n = len(outside)
        jvp_op, _ = self.derived(n, out_tree)
        batch_axes = derived_batch_axes(params, [("arg", i) for i in range(n)]
                                        + [("out", j) for j in range(len(cts))])
        out_batch = derived_batch_axes(params, [("arg", n + k) for k in range(len(group_avals))])
        return jvp_op.bind([*outside, *cts], params["static_kwargs"], out_tree, group_avals,
                           batch_axes, out_batch)


def _aval(x):
    import jax

    return jax.typeof(x)


def nonlinear(fn: Callable, result_shape_dtypes: ResultSpec | Callable[..., ResultSpec], *,
              jvp: Callable | Callback, vjp: Callable | Callback | None,
              vjp_shape_dtypes: Callable[..., ResultSpec] | None = None,
              nondiff_argnums: Sequence[int] = (), in_place: bool = False,
              vmap_method: str = "sequential", name: str | None = None) -> Callback:
    """Binds a nonlinear function with its Jacobian-vector and vector-Jacobian products.

    Args:
      fn: ``fn(*args, **static_kwargs)`` returning its results, like
        :func:`xlabind.callback`.
      result_shape_dtypes: As in :func:`xlabind.callback`.
      jvp: ``jvp(*args, *tangents, **static_kwargs)``, with one tangent per
        differentiable argument (those not in ``nondiff_argnums``), returning
        the tangents of the results (same structure as ``fn``'s). Linear in
        the tangents. An xlabind function (e.g. from ``xlabind.nonlinear``)
        with derivatives of its own makes second derivatives forward work.
      vjp: ``vjp(*args, *cotangents, **static_kwargs)``, with one cotangent
        per result of ``fn`` (flattened), returning one cotangent per
        differentiable argument (a bare array when there is one, else a
        tuple): the linear transpose of ``jvp`` in its tangents (no complex
        conjugation). An xlabind function with derivatives of its own makes
        ``jax.hessian`` work. ``None``: forward mode only.
      vjp_shape_dtypes: Result shapes of ``vjp``, only needed for
        ``vmap_method="native"`` batching of it (else it runs sequentially).
      nondiff_argnums, in_place, vmap_method, name: As in :func:`xlabind.linear`;
        ``in_place`` applies to plain-function ``jvp``/``vjp`` too.

    Example:
      >>> import jax, jax.numpy as jnp, numpy as np, xlabind
      >>> sin = xlabind.nonlinear(np.sin, lambda x: x,
      ...                         jvp=lambda x, t: np.cos(x) * t,
      ...                         vjp=lambda x, ct: np.cos(x) * ct)
      >>> float(jax.grad(lambda x: sin(x).sum())(jnp.zeros(3))[0])
      1.0
    """
    return _Nonlinear(fn, jvp, vjp, result_shape_dtypes, vjp_shape_dtypes, nondiff_argnums,
                      in_place, vmap_method, name).forward
