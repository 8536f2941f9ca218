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

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import jax

from xlabind._primitive.definition import BoundFunction, Definition, ResultSpec
from xlabind._primitive.derivatives import (
    LinearityRules,
    TangentFn,
    instantiate,
    output_tangents,
)
from xlabind._primitive.derived_layouts import bind_derived
from xlabind._primitive.factors import Rule
from xlabind._primitive.primitive import Call
from xlabind._primitive.traced_rules import Traceable, traced_tangent
from xlabind._primitive.trees import flat_results_tree
from xlabind._runtime.make_definition import Function, derived_function, make_definition


class _Nonlinear:
    def __init__(
        self,
        fn: Function,
        jvp: Function | BoundFunction | Traceable,
        vjp: Function | BoundFunction | None,
        result_shape_dtypes: ResultSpec | Callable[..., ResultSpec],
        vjp_shape_dtypes: Callable[..., ResultSpec] | None,
        options: dict[str, Any],
    ) -> None:
        tangent = self._traced_tangent if isinstance(jvp, Traceable) else self._tangent
        self.forward = make_definition(
            fn,
            result_shape_dtypes,
            **options,
            rules=LinearityRules(groups=lambda n: [], params_tangent=tangent),
        )
        # A user's bound jvp / vjp stands for its definition (its rules, its functions).
        self.jvp: Definition | Function | Traceable = (
            jvp.definition if isinstance(jvp, BoundFunction) else jvp
        )
        self.vjp: Definition | Function | None = (
            vjp.definition if isinstance(vjp, BoundFunction) else vjp
        )
        self.vjp_shape_dtypes = vjp_shape_dtypes
        self.platforms = options["platforms"]
        self._derived: dict[Any, tuple[Definition, Definition | None]] = {}

    def _diff(self, n: int) -> list[int]:
        return [i for i in range(n) if i not in self.forward.nondiff_argnums]

    def derived(self, n: int, out_tree: Any) -> tuple[Definition, Definition | None]:
        """(jvp op, vjp op) for calls of f with n arguments and this result tree.

        jvp op: (*args, *tangents of diff args) -> tangents of f's results.
        vjp op: (*args, *cotangents of f's results) -> cotangents of diff args.
        Each is linear in its last group and the other's transpose.
        """
        key = (n, out_tree)
        if key in self._derived:
            return self._derived[key]
        fwd = self.forward
        diff = self._diff(n)

        def user_rules(user: Any) -> TangentFn | None:
            if isinstance(user, Definition) and user.rules is not None:
                # Derivatives in the primals come from the user's own xlabind function.
                return lambda op, primals, tangents, call: output_tangents(
                    user, primals, tangents, call
                )
            return None

        def derived_op(
            user: Any,
            shapes: ResultSpec | Callable[..., ResultSpec] | None,
            suffix: str,
            **rules: Any,
        ) -> Definition:
            # A derived function runs the user's Python functions (a Definition's, by platform).
            function = (
                cast(Any, user.implementation).functions if isinstance(user, Definition) else user
            )
            return derived_function(
                fwd,
                self.platforms,
                function,
                shapes,
                suffix,
                in_place=getattr(user, "in_place", fwd.in_place),
                nondiff_argnums=fwd.nondiff_argnums,
                rules=LinearityRules(
                    groups=lambda n_all: [list(range(n, n_all))],
                    params_tangent=user_rules(user),
                    **rules,
                ),
                # Under native vmap each tangent is laid out like its primal, so f's
                # result-shape function describes the JVP's results too.
                aligned_pairs=[(i, n + k) for k, i in enumerate(diff)] if suffix == "jvp" else (),
            )

        def jvp_shapes(
            *structs: Any, batch_axes: Sequence[int | None] | None = None, **kw: Any
        ) -> Any:
            # f's result shapes, from f's own arguments (the first n).
            extra = (
                {"batch_axes": batch_axes[:n] if batch_axes else batch_axes}
                if fwd.vmap_method == "native"
                else {}
            )
            # Used only where fwd has a shape function (below).
            return cast(Callable[..., Any], fwd.shape_function)(*structs[:n], **kw, **extra)

        jvp_op = derived_op(
            self.jvp,
            jvp_shapes if fwd.has_shape_function else None,
            "jvp",
            transposes=[None if self.vjp is None else self._call_vjp],
            missing_transpose_hint="Pass vjp= to xlabind.nonlinear.",
        )
        vjp_op = (
            None
            if self.vjp is None
            else derived_op(
                self.vjp,
                self.vjp_shape_dtypes,
                "vjp",
                transposes=[lambda *a: self._call_jvp_from_vjp(out_tree, *a)],
            )
        )
        self._derived[key] = (jvp_op, vjp_op)
        return jvp_op, vjp_op

    def _tangent(
        self, op: Definition, primals: Sequence[Any], tangents: Sequence[Any], call: Call
    ) -> list[Any]:
        """f's output tangents: one call of the jvp op."""
        n = len(primals)
        diff = self._diff(n)
        jvp_op, _ = self.derived(n, call.out_tree)
        operands = [*primals, *(instantiate(tangents[i], jax.typeof(primals[i])) for i in diff)]
        return bind_derived(
            jvp_op,
            call,
            operands,
            [("arg", i) for i in range(n)] + [("arg", i) for i in diff],
            call.out_tree,
            call.result_avals,
            [("out", j) for j in range(len(call.result_avals))],
        )

    def _traced_tangent(
        self, op: Definition, primals: Sequence[Any], tangents: Sequence[Any], call: Call
    ) -> list[Any]:
        """f's output tangents from a JAX-traceable rule (on every vmap level's
        elements, when the call is batched natively)."""
        rule = cast(Traceable, self.jvp)  # this tangent is chosen for Traceable ones only
        return traced_tangent(rule.fn, self._diff(len(primals)), primals, tangents, call)

    def _call_vjp(
        self,
        op: Definition,
        outside: Sequence[Any],
        cts: Sequence[Any],
        group_avals: Sequence[Any],
        call: Call,
    ) -> list[Any]:
        # The jvp op transposed in its tangents: outside = f's args, cts = per f result.
        # `call` is the jvp op's call: its operands are (f's args, tangents of diff args).
        n = len(outside)
        _, vjp_op = self.derived(n, call.out_tree)
        return bind_derived(
            vjp_op,
            call,
            [*outside, *cts],
            [("arg", i) for i in range(n)] + [("out", j) for j in range(len(cts))],
            flat_results_tree(len(group_avals)),
            group_avals,
            [("arg", n + k) for k in range(len(group_avals))],
        )

    def _call_jvp_from_vjp(
        self,
        out_tree: Any,
        op: Definition,
        outside: Sequence[Any],
        cts: Sequence[Any],
        group_avals: Sequence[Any],
        call: Call,
    ) -> list[Any]:
        # The vjp op transposed in its cotangents: the jvp op on (args, cts).
        n = len(outside)
        jvp_op, _ = self.derived(n, out_tree)
        return bind_derived(
            jvp_op,
            call,
            [*outside, *cts],
            [("arg", i) for i in range(n)] + [("out", j) for j in range(len(cts))],
            out_tree,
            group_avals,
            [("arg", n + k) for k in range(len(group_avals))],
        )


def nonlinear(
    fn: Function,
    result_shape_dtypes: ResultSpec | Callable[..., ResultSpec],
    *,
    jvp: Function | BoundFunction | Traceable,
    vjp: Function | BoundFunction | None = None,
    vjp_shape_dtypes: Callable[..., ResultSpec] | None = None,
    nondiff_argnums: Sequence[int] = (),
    in_place: bool = False,
    vmap_method: str = "sequential",
    platforms: Sequence[str] = ("cpu",),
    sharding_rule: Rule | None = None,
    synchronize: bool = False,
    input_output_aliases: Mapping[int, int] | None = None,
    effect: str | None = None,
    stop_all_devices: bool = True,
    name: str | None = None,
) -> BoundFunction:
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
        conjugation). Under ``vmap_method="expand_dims"`` each cotangent has
        the batch in front, also that of an argument it receives with size 1
        there (xlabind sums it), inside ``jax.grad`` or outside it alike. An
        xlabind function with derivatives of its own makes ``jax.hessian``
        work. ``None`` (the default): reverse mode comes from transposing
        ``jvp`` when it is :func:`xlabind.traceable`; otherwise
        forward mode only, and ``jax.grad`` raises a TypeError asking for
        ``vjp``.
      vjp_shape_dtypes: Result shapes of ``vjp``, only needed for
        ``vmap_method="native"`` batching of it (else it runs sequentially).
      nondiff_argnums: Positions of arguments that are not differentiated
        (:param:`nondiff_argnums`).
      in_place: Whether ``fn`` writes its results into ``out=`` and returns
        ``None``: no copy (:param:`in_place`).
      vmap_method: How a ``jax.vmap`` batch reaches ``fn``: one of
        :data:`~xlabind.VMAP_METHODS` (:param:`vmap_method`).
      platforms: The platforms a plain ``fn`` runs on; ``("cpu",)`` by default
        (:param:`platforms`).
      sharding_rule: How a call may be split across devices under a sharded
        ``jax.jit`` (:param:`sharding_rule`).
      synchronize: CUDA: wait for XLA's stream before each call and for the
        device after it (:param:`synchronize`).
      input_output_aliases: ``{argument index: result index}``: results written
        into arguments' buffers (:param:`input_output_aliases`).
      effect: ``None`` (pure), ``"unordered"`` or ``"ordered"``
        (:param:`effect`).
      stop_all_devices: Whether a failure in one device's call stops every
        device of a sharded program, as it does by default; ``False`` spares
        the calls made once per device the small collective that takes
        (:param:`stop_all_devices`).
      name: The name error messages use; ``fn.__qualname__`` by default
        (:param:`name`).

    The shared parameters apply to plain-function ``jvp`` and ``vjp`` as
    well, but ``input_output_aliases`` and ``effect`` only to ``fn``. Under
    ``vmap_method="native"`` the JVP receives each primal laid out exactly
    like its tangent (xlabind broadcasts the unbatched one), and its results
    are laid out as ``fn``'s would be for those arguments.

    Example:
      >>> import jax, jax.numpy as jnp, numpy as np, xlabind
      >>> sin = xlabind.nonlinear(np.sin, lambda x: x,
      ...                         jvp=lambda x, t: np.cos(x) * t,
      ...                         vjp=lambda x, ct: np.cos(x) * ct)
      >>> float(jax.grad(lambda x: sin(x).sum())(jnp.zeros(3))[0])
      1.0
    """
    return BoundFunction(
        _Nonlinear(
            fn,
            jvp,
            vjp,
            result_shape_dtypes,
            vjp_shape_dtypes,
            dict(
                nondiff_argnums=nondiff_argnums,
                in_place=in_place,
                vmap_method=vmap_method,
                platforms=platforms,
                sharding_rule=sharding_rule,
                synchronize=synchronize,
                input_output_aliases=input_output_aliases,
                effect=effect,
                stop_all_devices=stop_all_devices,
                name=name,
            ),
        ).forward
    )
