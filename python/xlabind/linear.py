"""`xlabind.linear`: a linear function and its transpose, differentiable to any order.

f(a; u) is linear (jointly) in its differentiable arguments u; the arguments in
``nondiff_argnums`` (a) may enter in any way. Its JVP is f itself applied to
the tangents, its transpose is the user's ``transpose(a; ct)``, and the
transpose's transpose is f again, so ``jax.grad``, ``jax.jacfwd``,
``jax.jacrev``, ``jax.hessian`` and ``jax.linear_transpose`` all work, to any
order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from xlabind._primitive.definition import BoundFunction, Definition, ResultSpec
from xlabind._primitive.derivatives import LinearityRules
from xlabind._primitive.derived_layouts import bind_derived
from xlabind._primitive.factors import Rule
from xlabind._primitive.primitive import Call
from xlabind._primitive.traced_rules import Traceable, traced_tangent, transposed_tangent
from xlabind._primitive.trees import flat_results_tree, interleave
from xlabind._runtime.make_definition import Function, derived_function, make_definition


def _diff_positions(n: int, nondiff: Sequence[int]) -> list[int]:
    return [i for i in range(n) if i not in nondiff]


class _LinearPair:
    """f and its transpose, each a Definition whose transpose calls the other."""

    def __init__(
        self,
        fn: Function,
        transpose: Function | None,
        result_shape_dtypes: ResultSpec | Callable[..., ResultSpec],
        transpose_shape_dtypes: Callable[..., ResultSpec] | None,
        jvp: Traceable | None,
        options: dict[str, Any],
    ) -> None:
        #: The arguments f is not linear in; differentiable only with a jvp rule.
        self.nondiff = tuple(sorted({int(i) for i in options["nondiff_argnums"]}))
        if jvp is not None and not isinstance(jvp, Traceable):
            raise TypeError(
                f"xlabind.linear: jvp must be a rule written in JAX, "
                f"xlabind.traceable(rule), got {type(jvp).__name__}"
            )
        self.jvp = jvp
        fixed_tangent = None
        if jvp is not None:
            # Differentiable in every argument: the nondiff ones through the rule.
            options = {**options, "nondiff_argnums": ()}
            fixed_tangent = lambda op, primals, tangents, call: traced_tangent(
                jvp.fn, self.nondiff, primals, tangents, call
            )
        self.forward = make_definition(
            fn,
            result_shape_dtypes,
            **options,
            rules=LinearityRules(
                groups=self._groups,
                transposes=[self._call_transpose] if transpose is not None else [],
                params_tangent=fixed_tangent,
                missing_transpose_hint="Pass transpose= to xlabind.linear.",
            ),
        )
        self.transpose_fn = transpose
        self.transpose_shape_dtypes = transpose_shape_dtypes
        self.platforms = options["platforms"]
        self._transposes: dict[Any, Definition] = {}  # by the forward call's result tree

    def _groups(self, n: int) -> list[list[int]]:
        out_of_range = [i for i in self.nondiff if i >= n]
        if out_of_range:
            raise ValueError(
                f"{self.forward.name}: nondiff_argnums {out_of_range} out of range "
                f"for a call with {n} positional arguments"
            )
        return [_diff_positions(n, self.nondiff)]

    def transposed(self, forward_out_tree: Any) -> Definition:
        """The transpose: (nondiff args..., cotangents...) -> one cotangent per diff arg."""
        op = self._transposes.get(forward_out_tree)
        if op is None:
            # Only _call_transpose asks, which f has only with a transpose.
            assert self.transpose_fn is not None
            k = len(self.nondiff)
            fixed_tangent = None
            if self.jvp is not None:
                fixed_tangent = lambda op, primals, tangents, call: transposed_tangent(
                    self.jvp.fn, self.nondiff, primals, tangents, call
                )
            op = derived_function(
                self.forward,
                self.platforms,
                self.transpose_fn,
                self.transpose_shape_dtypes,
                "transpose",
                nondiff_argnums=range(k) if self.jvp is None else (),
                rules=LinearityRules(
                    groups=lambda n: [list(range(k, n))],
                    transposes=[lambda *a: self._call_forward(forward_out_tree, *a)],
                    params_tangent=fixed_tangent,
                ),
            )
            self._transposes[forward_out_tree] = op
        return op

    def _call_transpose(
        self,
        op: Definition,
        outside: Sequence[Any],
        cts: Sequence[Any],
        group_avals: Sequence[Any],
        call: Call,
    ) -> list[Any]:
        # outside: f's nondiff args; cts: one per f result.
        n = len(outside) + len(group_avals)
        diff = _diff_positions(n, self.nondiff)
        return bind_derived(
            self.transposed(call.out_tree),
            call,
            [*outside, *cts],
            [("arg", i) for i in self.nondiff] + [("out", j) for j in range(len(cts))],
            flat_results_tree(len(diff)),
            group_avals,
            [("arg", i) for i in diff],
        )

    def _call_forward(
        self,
        forward_out_tree: Any,
        op: Definition,
        outside: Sequence[Any],
        cts: Sequence[Any],
        group_avals: Sequence[Any],
        call: Call,
    ) -> list[Any]:
        # The transpose transposed: f again. outside: the transpose's nondiff args
        # (f's nondiff args); cts: one per transpose result (per f diff arg).
        k = len(outside)
        n = k + len(cts)
        operands = interleave(n, self.nondiff, outside, cts)
        entries = interleave(
            n, self.nondiff, [("arg", i) for i in range(k)], [("out", j) for j in range(len(cts))]
        )
        return bind_derived(
            self.forward,
            call,
            operands,
            entries,
            forward_out_tree,
            group_avals,
            [("arg", i) for i in range(k, k + len(group_avals))],
        )


def linear(
    fn: Function,
    transpose: Function | None,
    result_shape_dtypes: ResultSpec | Callable[..., ResultSpec],
    *,
    transpose_shape_dtypes: Callable[..., ResultSpec] | None = None,
    nondiff_argnums: Sequence[int] = (),
    jvp: Traceable | None = None,
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
    """Binds a linear function and its transpose as one differentiable JAX operation.

    Args:
      fn: ``fn(*args, **static_kwargs)``, linear (jointly) in every argument
        not in ``nondiff_argnums``. Returns its results like
        :func:`xlabind.callback` (or fills ``out=`` with ``in_place=True``).
      transpose: ``transpose(*nondiff_args, *cotangents, **static_kwargs)``:
        the linear transpose of ``fn`` in its differentiable arguments, with
        one cotangent per result of ``fn`` (flattened), returning one
        cotangent per differentiable argument (a bare array when there is
        one, else a tuple). For complex maps this is the *transpose*, not the
        adjoint: no complex conjugation (JAX's convention). ``None``:
        forward mode only.
      result_shape_dtypes: As in :func:`xlabind.callback`.
      transpose_shape_dtypes: ``(*nondiff_args, *cotangents, **kw)`` ->
        results of ``transpose``. Needed only for ``vmap_method="native"``
        batching of the transpose; without it the transpose is batched
        sequentially.
      nondiff_argnums: Positions of arguments ``fn`` is not linear in, never
        differentiated unless ``jvp`` is given (:param:`nondiff_argnums`).
      jvp: The derivative in the ``nondiff_argnums`` arguments, which makes
        them differentiable: a rule written in JAX, ``xlabind.traceable(rule)``
        with ``rule(*args, *tangents, **static_kwargs)`` taking one tangent
        per ``nondiff_argnums`` argument (``None`` where it is zero) and
        returning the tangents of the results. It must be linear in those
        tangents and in ``fn``'s linear arguments (e.g. ``fn`` itself, or
        another bound function, applied to them). The transpose's
        derivative in those arguments is derived from it, so derivatives of
        every order in every argument work (``jax.hessian`` over both).
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

    ``in_place``, ``vmap_method``, ``platforms``, ``sharding_rule``,
    ``synchronize``, ``stop_all_devices`` and ``name`` apply to ``transpose``
    as well; ``input_output_aliases`` and ``effect`` to ``fn`` only (a
    transpose is not aliased, and an effectful ``fn`` is not differentiable).

    Example:
      >>> import jax, jax.numpy as jnp, numpy as np, xlabind
      >>> A = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
      >>> matvec = xlabind.linear(lambda x: A @ x, lambda ct: A.T @ ct, lambda x: x)
      >>> jax.grad(lambda x: matvec(x).sum())(jnp.ones(2))
      Array([4., 6.], dtype=float32)
    """
    options: dict[str, Any] = dict(
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
    )
    return BoundFunction(
        _LinearPair(
            fn, transpose, result_shape_dtypes, transpose_shape_dtypes, jvp, options
        ).forward
    )
