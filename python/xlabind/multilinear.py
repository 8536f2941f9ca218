"""`xlabind.multilinear`: a function linear in each argument separately.

f(a; x_1, ..., x_m) is linear in each x_i with the others fixed (a product,
a bilinear form, a convolution of two signals). Its JVP is the product rule,
one call of f per argument with a nonzero tangent; transposing with respect to
x_i calls the user's transpose ``T_i(args without x_i..., cotangents...)``.

Each T_i is itself multilinear in the other x_j and the cotangents, so its
JVP is known too (hence ``jax.hessian``). Its transposes follow from f and the
other transposes: in the cotangents it is f with the new cotangent as x_i,
and in x_j it is T_j with the new cotangent as x_i (both from
<c, T_i(x, y)> = <y, f(x with x_i = c)>). So every derivative order works in
every mode, given the m transposes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from xlabind._primitive.definition import BoundFunction, Definition, ResultSpec
from xlabind._primitive.derivatives import LinearityRules, TransposeFn
from xlabind._primitive.derived_layouts import bind_derived
from xlabind._primitive.factors import Rule
from xlabind._primitive.primitive import Call
from xlabind._primitive.trees import flat_results_tree
from xlabind._runtime.make_definition import Function, derived_function, make_definition


class _Multilinear:
    def __init__(
        self,
        fn: Function,
        transposes: Sequence[Function | BoundFunction | None],
        result_shape_dtypes: ResultSpec | Callable[..., ResultSpec],
        transpose_shape_dtypes: Sequence[Callable[..., ResultSpec] | None],
        options: dict[str, Any],
    ) -> None:
        self.forward = make_definition(
            fn,
            result_shape_dtypes,
            **options,
            rules=LinearityRules(groups=self._groups, transposes=self._transpose_for_group),
        )
        self.user_transposes = tuple(transposes)
        self.transpose_shape_dtypes = tuple(transpose_shape_dtypes or ())
        self.platforms = options["platforms"]
        self._derived: dict[Any, Definition] = {}

    def _diff(self, n: int) -> list[int]:
        return [i for i in range(n) if i not in self.forward.nondiff_argnums]

    def _groups(self, n: int) -> list[list[int]]:
        if len(self.user_transposes) != n:
            raise TypeError(
                f"{self.forward.name}: transposes must have one entry per argument "
                f"(None for nondiff ones): got {len(self.user_transposes)} for a call "
                f"with {n} arguments"
            )
        return [[i] for i in self._diff(n)]

    def _transpose_for_group(self, g: int, n: int) -> TransposeFn | None:
        i = self._diff(n)[g]
        if self.user_transposes[i] is None:
            return None
        return lambda op, outside, cts, group_avals, call: self._call_transpose(
            i, outside, cts, group_avals, call
        )

    def transposed(self, i: int, n: int, forward_out_tree: Any) -> Definition:
        """T_i: (args without i..., cotangents...) -> cotangent of arg i."""
        user = self.user_transposes[i]
        if isinstance(user, BoundFunction):
            return user.definition
        # Asked only for an argument with a transpose (_transpose_for_group).
        assert user is not None
        key = (i, n, forward_out_tree)
        op = self._derived.get(key)
        if op is None:
            fwd = self.forward
            spec = self.transpose_shape_dtypes[i] if i < len(self.transpose_shape_dtypes) else None
            outside_positions = [j for j in range(n) if j != i]
            nondiff = [k for k, j in enumerate(outside_positions) if j in fwd.nondiff_argnums]

            # T_i's operands: f's args without i, then the cotangents. It is
            # linear in each differentiable one of the former, and jointly in
            # the cotangents.
            singles = [k for k in range(n - 1) if k not in nondiff]

            def groups(n_t: int) -> list[list[int]]:
                return [[k] for k in singles] + [list(range(n - 1, n_t))]

            def transposes(g: int, n_t: int) -> TransposeFn | None:
                if g < len(singles):
                    # T_i transposed in x_j is T_j with c (T_i's cotangent) as x_i.
                    j = outside_positions[singles[g]]
                    if self.user_transposes[j] is None:
                        return None
                    return lambda op, outside, cts, group_avals, call: self._call_cross(
                        i, j, n, forward_out_tree, outside, cts, group_avals, call
                    )
                return lambda op, outside, cts, group_avals, call: self._call_forward(
                    i, n, forward_out_tree, outside, cts, group_avals, call
                )

            op = derived_function(
                fwd,
                self.platforms,
                user,
                spec,
                f"transpose {i}",
                nondiff_argnums=nondiff,
                rules=LinearityRules(
                    groups=groups,
                    transposes=transposes,
                    missing_transpose_hint=(
                        "Transposing it again needs the transposes of the other arguments too."
                    ),
                ),
            )
            self._derived[key] = op
        return op

    def _call_transpose(
        self,
        i: int,
        outside: Sequence[Any],
        cts: Sequence[Any],
        group_avals: Sequence[Any],
        call: Call,
    ) -> list[Any]:
        # T_i on (f's args without i, f's cotangents) gives the cotangent of arg i.
        n = len(outside) + 1
        outside_positions = [j for j in range(n) if j != i]
        return bind_derived(
            self.transposed(i, n, call.out_tree),
            call,
            [*outside, *cts],
            [("arg", j) for j in outside_positions] + [("out", j) for j in range(len(cts))],
            flat_results_tree(1),
            group_avals,
            [("arg", i)],
        )

    def _call_cross(
        self,
        i: int,
        j: int,
        n: int,
        forward_out_tree: Any,
        outside: Sequence[Any],
        cts: Sequence[Any],
        group_avals: Sequence[Any],
        call: Call,
    ) -> list[Any]:
        # T_i transposed in x_j is T_j with c (T_i's cotangent) as x_i. T_i's operands
        # are (f's args without i, f's cotangents); `outside` drops x_j from them.
        (c,) = cts
        t_positions = [p for p in range(n) if p != i]  # f's arg at each T_i operand slot
        kept_slots = [s for s, p in enumerate(t_positions) if p != j]
        args_without_j, ybar = outside[: n - 2], outside[n - 2 :]
        by_position = dict(zip((t_positions[s] for s in kept_slots), args_without_j))
        by_position[i] = c
        slot_of = {p: ("arg", s) for s, p in enumerate(t_positions)}
        slot_of[i] = ("out", 0)
        positions = [p for p in range(n) if p != j]
        operands = [by_position[p] for p in positions] + list(ybar)
        entries = [slot_of[p] for p in positions] + [("arg", n - 1 + k) for k in range(len(ybar))]
        return bind_derived(
            self.transposed(j, n, forward_out_tree),
            call,
            operands,
            entries,
            flat_results_tree(1),
            group_avals,
            [slot_of[j]],
        )

    def _call_forward(
        self,
        i: int,
        n: int,
        forward_out_tree: Any,
        outside: Sequence[Any],
        cts: Sequence[Any],
        group_avals: Sequence[Any],
        call: Call,
    ) -> list[Any]:
        # T_i transposed in its cotangents: f with the new cotangent as argument i.
        # outside = T_i's args other than the cotangents = f's args without i.
        (ct,) = cts
        operands = [*outside[:i], ct, *outside[i:]]
        entries = (
            [("arg", j) for j in range(i)] + [("out", 0)] + [("arg", j) for j in range(i, n - 1)]
        )
        return bind_derived(
            self.forward,
            call,
            operands,
            entries,
            forward_out_tree,
            group_avals,
            [("arg", k) for k in range(n - 1, n - 1 + len(group_avals))],
        )


def multilinear(
    fn: Function,
    transposes: Sequence[Function | BoundFunction | None],
    result_shape_dtypes: ResultSpec | Callable[..., ResultSpec],
    *,
    transpose_shape_dtypes: Sequence[Callable[..., ResultSpec] | None] = (),
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
    """Binds a function that is linear in each argument separately (multilinear).

    Args:
      fn: ``fn(*args, **static_kwargs)``, linear in each argument not in
        ``nondiff_argnums`` when the others are held fixed.
      transposes: One entry per argument of ``fn``. Entry i is
        ``T_i(*args_without_i, *cotangents, **static_kwargs)`` returning the
        cotangent of argument i (the linear transpose: no conjugation), or an
        xlabind function with that signature (then its own rules give further
        derivatives), or ``None`` (for nondiff arguments, or to forbid
        reverse mode in that argument).
      result_shape_dtypes: As in :func:`xlabind.callback`.
      transpose_shape_dtypes: Optional, one per argument: result shape
        functions of the transposes, for ``vmap_method="native"``.
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

    The shared parameters apply to the transposes as well, but
    ``input_output_aliases`` and ``effect`` only to ``fn``.

    Example:
      >>> import jax, jax.numpy as jnp, xlabind
      >>> mul = xlabind.multilinear(lambda x, y: x * y,
      ...                           (lambda y, ct: y * ct, lambda x, ct: x * ct),
      ...                           lambda x, y: x)
      >>> jax.grad(lambda x, y: mul(x, y).sum(), argnums=(0, 1))(jnp.ones(2), 3 * jnp.ones(2))
      (Array([3., 3.], dtype=float32), Array([1., 1.], dtype=float32))
    """
    return BoundFunction(
        _Multilinear(
            fn,
            transposes,
            result_shape_dtypes,
            transpose_shape_dtypes,
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
