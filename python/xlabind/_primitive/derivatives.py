"""The JVP and transpose rules of the `xlabind_call` primitive.

Every differentiable bound function describes how its results depend on its
arguments with one :class:`LinearityRules`:

* *groups*: sets of argument positions in each of which the function is
  jointly linear; across groups it is multilinear. A linear function has one
  group (all differentiable arguments), a multilinear one a group per
  argument, a nonlinear one none.
* *transposes*: per group, how to compute the cotangents of that group's
  arguments from the others and the output cotangents, or None.
* *params_tangent*: the tangent contribution of arguments in no group (a
  nonlinear function's arguments, or the primals a JVP function depends on),
  or None when those are not differentiable.

Arguments in the bound function's ``nondiff_argnums`` are never differentiated:
a nonzero tangent for one is an error that names it. Neither is a function
with an ``effect`` (its derivatives would run the effect again).

The JVP of a group is the function itself with the group's arguments replaced
by their tangents (linearity); so is every derivative order after it, and
transposing calls the group's transpose, itself a bound function with rules of
its own. Symbolic zeros call nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
from jax import dtypes
from jax.interpreters import ad

from xlabind._primitive.explicit_sharding import explicit_axes, gathered
from xlabind._primitive.primitive import PRIMITIVES, Call, bind

# (op, primals, tangents with ad.Zero, call) -> output tangents (ad.Zero allowed)
TangentFn = Callable[..., list]
# (op, outside_args, cts, group_avals, call) -> cotangents of the group's args
TransposeFn = Callable[..., list]
# (group index, number of arguments) -> TransposeFn or None
TransposeLookup = Callable[[int, int], "TransposeFn | None"]


@dataclass(frozen=True)
class LinearityRules:
    """How a bound function's results depend on its arguments (see module docstring)."""

    groups: Callable[[int], list[list[int]]]
    transposes: Sequence[TransposeFn | None] | TransposeLookup = ()
    params_tangent: TangentFn | None = None
    #: Said when a transpose is missing, e.g. "pass transpose=..." for the user's kind.
    missing_transpose_hint: str = field(default="")

    def transpose_for(self, group_index: int, n: int) -> TransposeFn | None:
        if callable(self.transposes):
            return self.transposes(group_index, n)
        return self.transposes[group_index] if group_index < len(self.transposes) else None


def is_zero(t) -> bool:
    return type(t) is ad.Zero or getattr(t, "dtype", None) == dtypes.float0


def zero_tangent(aval) -> ad.Zero:
    return ad.Zero(aval.to_tangent_aval())


def instantiate(t: Any, aval: Any) -> Any:
    """A dense tangent: zeros of `aval`'s shape and dtype where `t` is zero."""
    if is_zero(t):
        return jax.numpy.zeros(aval.shape, aval.dtype)
    return t


def add_tangents(terms: list[list], result_avals) -> list:
    out = [zero_tangent(a) for a in result_avals]
    for term in terms:
        out = [b if is_zero(a) else a if is_zero(b) else a + b for a, b in zip(out, term)]
    return out


def jvp_rule(primals, tangents, *, call: Call):
    if any(not is_zero(t) for t in tangents):
        # Before the primal call, which eagerly would run the effect at once.
        _refuse_effect(call.fn, "differentiated")
    outs = bind(call, primals)
    return outs, output_tangents(call.fn, primals, tangents, call)


def output_tangents(op, primals, tangents, call: Call) -> list:
    """The tangents of `op`'s results (ad.Zero where zero) for these input tangents."""
    nonzero = [i for i, t in enumerate(tangents) if not is_zero(t)]
    if not nonzero:
        return [zero_tangent(a) for a in call.result_avals]
    _refuse_effect(op, "differentiated")
    for i in nonzero:
        if i in op.nondiff_argnums:
            raise TypeError(
                f"{op.name}: argument {i} {op.terms.get('nondiff', 'is in nondiff_argnums')}, "
                f"so it cannot be "
                f"differentiated. Differentiate with respect to the other arguments only "
                f"(e.g. jax.grad(f, argnums=...)), or wrap it in jax.lax.stop_gradient."
            )
    rules = op.rules
    if rules is None:
        raise TypeError(
            f"{op.name} has no derivative rules. Bind it with xlabind.linear, "
            f"xlabind.multilinear or xlabind.nonlinear to differentiate it."
        )
    n = len(primals)
    terms = []
    grouped: set[int] = set()
    for group in rules.groups(n):
        grouped.update(group)
        if any(not is_zero(tangents[i]) for i in group):
            # Linear in the group: the JVP is the function itself on the tangents,
            # which are laid out like their primals.
            args = list(primals)
            for i in group:
                args[i] = instantiate(tangents[i], jax.typeof(primals[i]))
            terms.append(bind(call, args))
    rest = [i for i in nonzero if i not in grouped]
    if rest:
        if rules.params_tangent is None:
            raise TypeError(
                f"{op.name}: cannot differentiate with respect to argument {rest[0]}: "
                f"the function is linear only in arguments {sorted(grouped)} and no derivative "
                f"rule covers the others. For higher derivatives of a nonlinear function, "
                f"give its jvp and vjp as xlabind functions with derivatives of their own."
            )
        masked = [
            t if i in rest else zero_tangent(jax.typeof(p))
            for i, (p, t) in enumerate(zip(primals, tangents))
        ]
        terms.append(rules.params_tangent(op, primals, masked, call))
    return add_tangents(terms, call.result_avals)


def _refuse_effect(op, what: str) -> None:
    """An effectful function has no derivatives: its JVP and transpose are
    further calls (of itself or of its derived functions), which would run
    the effect again, as many times as the derivative needs."""
    if op.effect is not None:
        raise TypeError(
            f"{op.name} has effect={op.effect!r}, so it cannot be {what}: its derivatives "
            f"would run the effect again. Differentiate a function without the effect, or "
            f"wrap its arguments in jax.lax.stop_gradient."
        )


def transpose_rule(cts, *args, call: Call):
    op = call.fn
    _refuse_effect(op, "transposed")
    rules = op.rules
    undefined = [i for i, a in enumerate(args) if ad.is_undefined_primal(a)]
    if rules is None:
        raise TypeError(
            f"{op.name} has no transpose: it is not declared linear in any "
            f"argument. Bind it with xlabind.linear or xlabind.multilinear."
        )
    groups = rules.groups(len(args))
    matches = [g for g, group in enumerate(groups) if set(undefined) <= set(group)]
    if not matches:
        raise TypeError(
            f"{op.name} cannot be transposed with respect to arguments {undefined}: it is "
            f"linear only in each of the argument groups {groups} (and only with the other "
            f"arguments known)."
        )
    g = matches[0]
    transpose = rules.transpose_for(g, len(args))
    if transpose is None:
        raise TypeError(
            f"{op.name}: no transpose is known for arguments {groups[g]}. "
            f"{op.terms.get('missing_transpose', rules.missing_transpose_hint)}".strip()
        )
    group = groups[g]
    group_avals = [
        a.aval if ad.is_undefined_primal(a) else jax.typeof(a) for a in (args[i] for i in group)
    ]
    result: list[Any] = [None] * len(args)
    if all(is_zero(ct) for ct in cts):
        for i in undefined:
            result[i] = zero_tangent(args[i].aval)
        return result
    dense = [instantiate(ct, aval) for ct, aval in zip(cts, call.result_avals)]
    outside = [a for i, a in enumerate(args) if i not in group]
    if call.factors is None:
        # Without a rule it ran on whole arrays; so does its transpose, on a
        # cotangent that jax may have split (the user cannot reach it).
        dense = [gathered(ct) for ct in dense]
    group_cts = transpose(op, outside, dense, group_avals, call)
    for k, i in enumerate(group):
        if i in undefined:
            result[i] = _typed_like(group_cts[k], args[i].aval)
    return result


def _typed_like(ct, aval):
    """`ct` typed as its primal `aval` under Explicit mesh axes: a whole
    argument's cotangent computed split (by a factor the argument shares
    with a split one) is gathered, as jax requires a cotangent's type to be
    its primal's."""
    want = explicit_axes(aval)
    if is_zero(ct) or want == explicit_axes(jax.typeof(ct)):
        return ct
    return jax.sharding.reshard(ct, aval.sharding)


for _primitive in PRIMITIVES:
    ad.primitive_jvps[_primitive] = jvp_rule
    ad.primitive_transposes[_primitive] = transpose_rule
