"""How a call's results are sharded in jax's types under Explicit mesh axes
(``jax.sharding.AxisType.Explicit``), where every array's type says how it is
split and jax moves data only where the program asks.

A call with a sharding rule splits the factors its operands are sharded
along, as its lowering does (_lowering/partitioning.py): its results are
typed sharded along those factors, so nothing after the call gathers them.
A call that would have to gather an operand first — it has no sharding rule,
or its rule keeps the sharded dimension whole, or two operands split one
factor differently — is an error that says what to write instead (a rule, or
``jax.sharding.reshard``), rather than an all-gather the program never asked
for (jax's own ``ffi_call`` inserts one: jax #38551).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
from jax.sharding import NamedSharding, PartitionSpec

from xlabind._primitive.factors import split

Axes = tuple[str, ...]


def explicit_axes(aval) -> tuple[Axes | None, ...] | None:
    """Per dimension of `aval`, the Explicit mesh axes it is split over (None
    where it is whole); None when no dimension is split, or `aval` has no
    sharding in its type (jax 0.9, Auto and Manual axes)."""
    spec = getattr(getattr(aval, "sharding", None), "spec", None)
    if not spec or all(s is None for s in spec):
        return None
    axes = [None if s is None else (s,) if isinstance(s, str) else tuple(s) for s in spec]
    return tuple(axes) + (None,) * (len(aval.shape) - len(axes))


def _mesh_of(aval: Any) -> Any:
    return getattr(getattr(aval, "sharding", None), "mesh", None)


def _has_explicit_axes(mesh: Any) -> bool:
    return jax.sharding.AxisType.Explicit in getattr(mesh, "axis_types", ())


def result_shardings(call: Any, operand_avals: Sequence[Any]) -> list[NamedSharding] | None:
    """The shardings of `call`'s results (a primitive.Call; its status too, when
    it reports one) in jax's types, when an operand is on Explicit mesh axes
    (whole results where none is split); None when none is."""
    sharded = [(i, dims) for i, a in enumerate(operand_avals) if (dims := explicit_axes(a))]
    if not sharded or call.fn.effect == "ordered":
        # An ordered function runs once per program on whole arrays, as
        # io_callback(ordered=True) does: it takes no rule.
        # Whole results are typed on the operands' mesh, as jax's own ops'
        # are: on no mesh, vmap over an Explicit axis could not name it there.
        mesh = next((m for a in operand_avals if _has_explicit_axes(m := _mesh_of(a))), None)
        if mesh is None:
            return None
        count = len(call.result_avals) + bool(call.reports_status)
        return [NamedSharding(mesh, PartitionSpec()) for _ in range(count)]
    name = call.fn.name
    first, first_axes = sharded[0]
    mesh = operand_avals[first].sharding.mesh
    if call.factors is None:
        raise ValueError(
            f"{name}: argument {first} is split over Explicit mesh axes "
            f"({_described(first_axes)}), and {name} has no sharding_rule, so it "
            f"would run on whole arrays after an all-gather the program does not ask "
            f"for. Give it a sharding_rule naming the dimensions it computes "
            f"independently (e.g. sharding_rule='b n -> b n'), or gather the argument "
            f"first: jax.sharding.reshard(x, jax.sharding.PartitionSpec())."
        )
    free = split(call)
    chosen: dict[str, Axes] = {}
    where: dict[str, tuple[int, int]] = {}
    for i, dims in sharded:
        for k, (factor, axes) in enumerate(zip(call.factors[i], dims)):
            if axes is None:
                continue
            size = operand_avals[i].shape[k]
            if factor not in free:
                raise ValueError(
                    f"{name}: dimension {k} of argument {i} is split over Explicit mesh "
                    f"axes {axes}, but its sharding rule ({_rule(call)}) keeps that "
                    f"dimension ('{_named(factor)}') whole. Gather it first: "
                    f"jax.sharding.reshard(x, {_spec_without(dims, k)})."
                )
            # (A symbolic size, under jax.export, is checked when the program runs.)
            if isinstance(size, int) and size % math.prod(mesh.shape[a] for a in axes):
                raise ValueError(
                    f"{name}: dimension {k} of argument {i} (size {size}) is split over "
                    f"Explicit mesh axes {axes}, which it does not divide evenly."
                )
            if chosen.setdefault(factor, axes) != axes:
                j, m = where[factor]
                raise ValueError(
                    f"{name}: its sharding rule ({_rule(call)}) gives dimension {m} of "
                    f"argument {j} and dimension {k} of argument {i} one factor "
                    f"('{_named(factor)}'), split over different Explicit mesh axes "
                    f"({chosen[factor]} and {axes}). Reshard one of them "
                    f"(jax.sharding.reshard) so that both are split alike."
                )
            where.setdefault(factor, (i, k))
    used: dict[str, str] = {}
    for factor, factor_axes in chosen.items():
        for axis in factor_axes:
            if used.setdefault(axis, factor) != factor:
                raise ValueError(
                    f"{name}: its arguments split one mesh axis ('{axis}') for two factors "
                    f"of its sharding rule ({_rule(call)}): '{_named(used[axis])}' and "
                    f"'{_named(factor)}'. Reshard one of them (jax.sharding.reshard)."
                )
    shardings = [
        NamedSharding(mesh, PartitionSpec(*(spec_entry(chosen.get(f)) for f in factors)))
        for factors in call.out_factors
    ]
    if call.reports_status:  # one more result, whole: primitive.status_aval()
        shardings.append(NamedSharding(mesh, PartitionSpec(None)))
    return shardings


def gathered(x: Any) -> Any:
    """`x` whole on every device if its type splits it over Explicit mesh
    axes (jax moves no data there unless the program asks), else `x`."""
    if explicit_axes(jax.typeof(x)) is None:
        return x
    mesh = jax.typeof(x).sharding.mesh
    return jax.sharding.reshard(x, NamedSharding(mesh, PartitionSpec()))


def spec_entry(axes: Axes | None) -> str | Axes | None:
    """A PartitionSpec's entry for a dimension split over `axes` (None: whole)."""
    if not axes:
        return None
    return axes[0] if len(axes) == 1 else axes


def _described(axes: tuple[Axes | None, ...]) -> str:
    return "PartitionSpec(" + ", ".join(repr(spec_entry(a)) for a in axes) + ")"


def _spec_without(axes: tuple[Axes | None, ...], k: int) -> str:
    kept = tuple(None if d == k else a for d, a in enumerate(axes))
    return "jax.sharding." + _described(kept)


def _named(factor: str) -> str:
    """A factor as the user's rule names it (factors.parse_rule prefixes the
    user's names with "u"; the others are vmap's batch dimensions)."""
    return factor[1:] if factor.startswith("u") else "vmap batch"


def _rule(call: Any) -> str:
    """The call's rule in the user's names ('*' for a dimension vmap added)."""

    def arrays(lists) -> str:
        return ", ".join(
            " ".join(f[1:] if f.startswith("u") else "*" for f in factors) or "()"
            for factors in lists
        )

    return f"{arrays(call.factors)} -> {arrays(call.out_factors or ())}"
