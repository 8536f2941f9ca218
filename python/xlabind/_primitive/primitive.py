"""The `xlabind_call` primitive: one JAX primitive for every bound function.

Its one parameter, a :class:`Call`, says everything its rules need: which
bound function (its Definition, definition.py), the static keyword
arguments, the result tree and avals, under native vmap the batch axes of
operands and results, and with a sharding rule the factors. This module is a
leaf: the rules (derivatives.py, batching.py) and the per-platform lowering
(_lowering/rule.py) import it and register themselves.

Lifetime: a Call holds the definition strongly, so any traced program (a
jaxpr, in jax's caches or the user's hands) can still be lowered, transformed
and compiled whatever the user dropped; the definition refers to nothing
that jax's caches key on, so dropping the BoundFunction and the jitted
functions that use it frees everything, without ``jax.clear_caches()``.
Compiled executables keep their Python functions alive on the C++ side
(ffi/common/callback_state.h).

Inside ``jax.shard_map`` results vary over the manual axes that any operand
varies over (operands are first made to agree), as for jax's own primitives,
so that transposes and ``psum`` of results are those of the same function
written in jnp.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.extend.core import Primitive

from xlabind import _jax_internals as internals
from xlabind._primitive import explicit_sharding
from xlabind._primitive.static_kwargs import StaticKwargs

#: The size in bytes of a call's status (xlabind/native/call_status.h's
#: kStatusBytes; _runtime/extension.py checks the compiled module agrees).
STATUS_BYTES = 4096

xlabind_call_p = Primitive("xlabind_call")
xlabind_call_p.multiple_results = True
# The same primitive for calls whose lowering jax must not share between alike
# calls (_platforms.Platform.python_lowering_cacheable: a TPU's host transfers
# need a channel each). jax's lowering cache is per primitive, and its uncached
# lowering for several platforms at once fails (jax 0.10), so calls that can be
# cached (native targets, their formulations) keep the cached one.
xlabind_uncached_call_p = Primitive("xlabind_call")
xlabind_uncached_call_p.multiple_results = True
#: Both: every rule is registered for each.
PRIMITIVES = (xlabind_call_p, xlabind_uncached_call_p)

# Per operand (or result): per native vmap level, innermost first, the axis
# that level added, or None where the array is not batched at that level.
BatchAxes = tuple[tuple["int | None", ...], ...]


@dataclasses.dataclass(frozen=True)
class Call:
    """The parameters of one `xlabind_call` equation."""

    #: The Definition, or a WeakDefinition (eager calls' own programs); both .get() it.
    op: Any
    kwargs: StaticKwargs
    out_tree: Any  # a PyTreeDef
    result_avals: tuple[jax.core.ShapedArray, ...]
    #: Under vmap_method="native": each operand's batch axes, one entry per vmap level.
    batch_axes: BatchAxes | None = None
    #: Under vmap_method="native": each result's batch axes, one entry per vmap level.
    out_batch_axes: BatchAxes | None = None
    #: With a sharding rule: each operand's factor per dimension (factors.py).
    factors: tuple[tuple[str, ...], ...] | None = None
    #: With a sharding rule: each result's factor per dimension.
    out_factors: tuple[tuple[str, ...], ...] | None = None
    #: With a sharding rule: the factors summed into the results that lack them.
    summed: tuple[str, ...] = ()
    #: With a sharding rule: factors that stay whole even where every result
    #: has them (a derived call's, for what its parent keeps whole).
    whole: tuple[str, ...] = ()
    #: (i, k): under vmap operand k is laid out exactly like operand i, as in
    #: the Definition's aligned_pairs; a derived call's, from its parent's.
    aligned: tuple[tuple[int, int], ...] = ()
    #: One more result, the call's status (_lowering/status_exchange.py), instead of failing:
    #: for the per-device calls of a sharded program, which check it on every device.
    reports_status: bool = False
    #: (operand, result) pairs XLA may give one buffer (the definition's
    #: input_output_aliases), checked to have one shape and dtype. Results count
    #: without the status, which comes last, so they hold with reports_status too.
    #: A rule that changes the shapes (a vmap, a per-device shard) keeps only the
    #: pairs that still match; derived calls (transposes, JVPs, VJPs) have none.
    aliases: tuple[tuple[int, int], ...] = ()
    #: Under vmap_method="expand_dims": per operand, one flag per vmap level
    #: (innermost first; each level's axis goes in front of the earlier ones'):
    #: whether that level batches the operand (False: a size-1 axis stands in).
    expanded: tuple[tuple[bool, ...], ...] | None = None

    @property
    def custom_call_options(self) -> dict:
        """What the custom call needs beyond operands and attributes: the aliases
        (jax's operand_output_aliases), and has_side_effect for an effectful
        function, so that XLA never removes a call whose results are unused."""
        options: dict[str, Any] = {}
        if self.aliases:
            options["operand_output_aliases"] = dict(self.aliases)
        if self.fn.effect is not None:
            options["has_side_effect"] = True
        return options

    def matching_aliases(self, operand_avals, result_avals) -> tuple[tuple[int, int], ...]:
        """The aliases whose operand and result still have one shape and dtype in
        a call on `operand_avals` with `result_avals` (after a rule reshaped them)."""
        # Under vmap an operand may still be the user's NumPy array, whose
        # float64 jax (without x64) reads as float32.
        canonical = jax.dtypes.canonicalize_dtype
        return tuple(
            (i, j)
            for i, j in self.aliases
            if tuple(operand_avals[i].shape) == tuple(result_avals[j].shape)
            and canonical(operand_avals[i].dtype) == canonical(result_avals[j].dtype)
        )

    @property
    def fn(self) -> Any:
        """The bound function's Definition (definition.py, which imports this
        module: the primitive names it only through the parameter)."""
        return self.op.get()

    def replace(self, **changes) -> Call:
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        parts = [repr(self.op)]
        if self.kwargs:
            parts.append(f"kwargs={self.kwargs!r}")
        if self.batch_axes is not None:
            parts.append(f"batch_axes={self.batch_axes}")
        if self.expanded is not None:
            parts.append(f"expanded={self.expanded}")
        if self.factors is not None:
            parts.append(
                "sharding="
                + ", ".join(" ".join(f) for f in self.factors)
                + " -> "
                + ", ".join(" ".join(f) for f in self.out_factors or ())
            )
            if self.summed:
                parts.append("summed=" + " ".join(self.summed))
            if self.whole:
                parts.append("whole=" + " ".join(self.whole))
        if self.reports_status:
            parts.append("reports_status")
        if self.aliases:
            parts.append(f"aliases={dict(self.aliases)}")
        return "Call(" + ", ".join(parts) + ")"


internals.cached_weakly(Call)


def bind(call: Call, operands: Sequence[Any]) -> list:
    """Binds the primitive; returns the flat results."""
    cached = call.fn.implementation.lowering_cacheable
    primitive = xlabind_call_p if cached else xlabind_uncached_call_p
    return primitive.bind(*internals.agree_on_varying_axes(operands), call=call)


def status_aval() -> jax.core.ShapedArray:
    """The aval of a call's status result (xlabind/native/call_status.h)."""
    return jax.core.ShapedArray((STATUS_BYTES,), np.uint8)


def _abstract_eval(*operand_avals, call: Call):
    # Shapes and dtypes from the call; how the results are split, from the
    # operands now (a transpose's result avals are its primal's arguments').
    results = [
        jax.core.ShapedArray(a.shape, a.dtype, weak_type=a.weak_type) for a in call.result_avals
    ]
    shardings = explicit_sharding.result_shardings(call, operand_avals)
    if call.reports_status:
        results.append(status_aval())
    # An effect keeps jax from removing the call when its results are unused
    # (and, ordered, makes jax thread a token through it: _lowering/rule.py).
    return (
        internals.varying_like(results, operand_avals, shardings),
        internals.effects_of(call.fn.effect),
    )


def _eager(*operands, call: Call):
    # Eager calls compile once per call signature, into a cache the definition
    # owns (not jax's global primitive cache, which would keep the user's
    # function alive for good).
    with jax.disable_jit(False):
        return call.fn.eager_executable(call)(*operands)


for _primitive in PRIMITIVES:
    _primitive.def_effectful_abstract_eval(_abstract_eval)
    _primitive.def_impl(_eager)
