"""Sharding rules as factors: which dimensions of a call's arrays may be split
across devices (the algebra; how a call is then lowered is
_lowering/partitioning.py).

A rule names each dimension of each operand and result with a factor,
einsum-style: ``"b n, b -> b n"``. A factor that appears in every result is
*independent*: the function computes each of its indices on its own, so
xlabind may split it across devices. A factor declared *summed*
(:class:`ShardingRule`, einsum's contraction: ``"b n, n m -> b m"`` summed
over ``n``) is split too: each device computes the partial result of its
shard, and xlabind adds them up (a ``psum`` over the mesh axes that split
it). Every other dimension stays whole on each device.

Under vmap the batch axis is a new independent factor; transposes, JVPs and
VJPs inherit the factors of the arrays they stand for, and a factor the
parent splits (independent or summed) with its operands that one of their
results lacks is summed into that result: the transpose of a broadcast is a
sum, so the gradient of a sharded function is split the same way, with one
``psum``. A factor of the parent's results alone stays whole in them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import jax
import numpy as np

# Per operand (or result): one factor name per dimension.
Factors = tuple[tuple[str, ...], ...]

_FACTOR = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")


@dataclasses.dataclass(frozen=True)
class ShardingRule:
    """A sharding rule with summed factors: einsum's contraction.

    ``einsum`` names each dimension of each operand and result, as a plain
    string rule does (``"b n, n m -> b m"``). Each factor in ``summed`` appears
    in operands only; the function's result is the *sum* over that factor's
    indices of what it computes on each of them, so a device may compute the
    partial result of its shard and xlabind adds the devices' results up
    (``psum``). Declare a factor summed only if that holds: e.g. a matrix
    product's inner dimension, a histogram's samples; not a ``max`` or a
    norm (those keep the factor whole: leave it out of ``summed``).

    Example:
      >>> import jax
      >>> import numpy as np
      >>> import xlabind
      >>> matmul = xlabind.callback(
      ...     lambda a, b: np.asarray(a) @ np.asarray(b),
      ...     lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), a.dtype),
      ...     sharding_rule=xlabind.ShardingRule("i n, n j -> i j", summed=("n",)))
      >>> matmul(np.ones((2, 3)), np.ones((3, 2)))
      Array([[3., 3.],
             [3., 3.]], dtype=float32)
    """

    einsum: str
    #: The summed factors' names (one name alone works too).
    summed: tuple[str, ...] | str = ()

    def __post_init__(self):
        summed = (self.summed,) if isinstance(self.summed, str) else tuple(self.summed)
        object.__setattr__(self, "summed", summed)


#: What a bound function's ``sharding_rule`` may be: a rule, or a function of
#: the operands' ShapeDtypeStructs and the static keyword arguments returning one.
Rule = str | ShardingRule | Callable[..., "str | ShardingRule"]


def parse_rule(
    name: str, rule: Rule, operands, kwargs, result_avals
) -> tuple[Factors, Factors, tuple[str, ...]]:
    """The factors of operands and results under a user's sharding rule, and
    its summed factors."""
    if callable(rule):
        rule = rule(*[jax.ShapeDtypeStruct(x.shape, x.dtype) for x in operands], **kwargs)
    summed: tuple[str, ...] = ()
    if isinstance(rule, ShardingRule):
        summed = tuple(rule.summed)
        rule = rule.einsum
    if not isinstance(rule, str) or rule.count("->") != 1:
        raise ValueError(
            f"{name}: sharding_rule must be a string like 'b n, b -> b n' "
            f"(operands, '->', results; '()' for an array with no dimensions) "
            f"or an xlabind.ShardingRule, got {rule!r}"
        )
    lhs, rhs = rule.split("->")

    def arrays(side: str, what: str, shapes) -> Factors:
        # "()" is an array with no dimensions (a side with nothing is no arrays).
        parts = (
            [[] if p.strip() == "()" else p.split() for p in side.split(",")]
            if side.strip()
            else []
        )
        if len(parts) != len(shapes):
            raise ValueError(
                f"{name}: sharding_rule {rule!r} describes {len(parts)} {what}s, "
                f"the call has {len(shapes)} (write '()' for one with no "
                f"dimensions)"
            )
        for k, (factors, shape) in enumerate(zip(parts, shapes)):
            if len(factors) != len(shape):
                raise ValueError(
                    f"{name}: sharding_rule {rule!r} gives {what} {k} "
                    f"{len(factors)} dimensions, it has shape {tuple(shape)}"
                )
            bad = [f for f in factors if not _FACTOR.match(f)]
            if bad or len(set(factors)) != len(factors):
                raise ValueError(
                    f"{name}: sharding_rule {rule!r}: {what} {k} needs distinct "
                    f"factor names (letters, digits, _), got {factors}"
                )
        # User factors get a prefix of their own: xlabind adds factors for vmap.
        return tuple(tuple("u" + f for f in factors) for factors in parts)

    factors = arrays(lhs, "operand", [x.shape for x in operands])
    out_factors = arrays(rhs, "result", [a.shape for a in result_avals])
    sizes: dict[str, int] = {}
    for array_factors, shape in zip(
        factors + out_factors, [x.shape for x in operands] + [a.shape for a in result_avals]
    ):
        for factor, size in zip(array_factors, shape):
            if sizes.setdefault(factor, size) != size:
                raise ValueError(
                    f"{name}: sharding_rule {rule!r}: factor '{factor[1:]}' has "
                    f"sizes {sizes[factor]} and {size}"
                )
    in_operands = {f for array in factors for f in array}
    in_results = {f for array in out_factors for f in array}
    for factor in summed:
        if not isinstance(factor, str) or "u" + factor not in in_operands:
            raise ValueError(
                f"{name}: sharding_rule {rule!r}: summed factor {factor!r} names "
                f"no dimension of an operand"
            )
        if "u" + factor in in_results:
            raise ValueError(
                f"{name}: sharding_rule {rule!r}: summed factor {factor!r} is a "
                f"dimension of a result; a summed factor appears in operands only"
            )
    if summed:
        for j, aval in enumerate(result_avals):
            if aval.dtype == np.bool_:
                raise ValueError(
                    f"{name}: sharding_rule {rule!r} sums over {summed}, but "
                    f"result {j} is bool; sums need numbers"
                )
    return factors, out_factors, tuple("u" + f for f in dict.fromkeys(summed))


def new_factor(*factor_lists: Factors | None) -> str:
    """A factor name no array of the call uses yet."""
    used = {f for lists in factor_lists if lists for array in lists for f in array}
    k = 0
    while f"v{k}" in used:
        k += 1
    return f"v{k}"


def insert_factor(factors: tuple[str, ...], axis: int | None, factor: str) -> tuple[str, ...]:
    if axis is None:
        return factors
    return factors[:axis] + (factor,) + factors[axis:]


def independent(call) -> set[str]:
    """The factors every result has (and that the call does not keep whole):
    dimensions the function computes index by index."""
    if call.factors is None or not call.out_factors:
        return set()
    return set.intersection(*(set(f) for f in call.out_factors)) - set(call.whole)


def split(call) -> set[str]:
    """The factors a call may split across devices: independent or summed."""
    return independent(call) | set(call.summed)


def derived_factors(
    parent, factors: Factors, out_factors: Factors
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(summed, whole) for a call derived from `parent` (a JVP, VJP or
    transpose) whose arrays have `factors` and `out_factors`.

    It may split only what the parent splits with its operands: a factor
    the parent keeps whole stays whole, even where every derived result has
    it (a cumsum's transpose is no more independent in its axis than the
    cumsum), and so does one of the parent's results alone, which no block
    of operands computes (a filter's transpose, given a block of its
    result's lines, could not tell where they lie). A factor the parent
    splits that the derived operands have and one of its results lacks is
    summed into that result: a VJP's cotangent of an argument without the
    factor is the sum of every index's contribution, a JVP's tangent of a
    summed result the sum of its terms' tangents."""
    if parent.factors is None:
        return (), ()
    in_operands = {f for array in factors for f in array}
    used = in_operands | {f for array in out_factors for f in array}
    splits = split(parent) & {f for array in parent.factors for f in array}
    whole = tuple(sorted(used - splits))
    if not out_factors:
        return (), whole
    in_every_result = set.intersection(*(set(f) for f in out_factors))
    summed = tuple(sorted(f for f in splits if f in in_operands and f not in in_every_result))
    return summed, whole
