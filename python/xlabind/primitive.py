"""The `xlabind_call` primitive: one JAX primitive for every bound function.

Its one parameter, a :class:`Call`, says everything its rules need: which
bound function (through a weak :class:`OpHandle`), the static keyword
arguments, the result tree and avals, and under native vmap the batch axes of
operands and results. This module is a leaf: the rules (derivative_rules.py,
batching_rules.py) and the per-platform lowering (lowering.py) import it and
register themselves.

Lifetime: a jaxpr, and so every cache of jax's that holds one, refers to the
bound function only weakly. What must live as long as an executable (the
user's Python function, through its registry entry) is kept by the
executable itself, so dropping the bound function and the executables that
use it frees everything, without ``jax.clear_caches()``.
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import TYPE_CHECKING, Any, Sequence

import jax
from jax.extend.core import Primitive

from xlabind._static_kwargs import StaticKwargs

if TYPE_CHECKING:  # pragma: no cover
    from xlabind.bound_function import BoundFunction

xlabind_call_p = Primitive("xlabind_call")
xlabind_call_p.multiple_results = True

# Per operand (or result): per native vmap level, innermost first, the axis
# that level added, or None where the array is not batched at that level.
BatchAxes = tuple[tuple["int | None", ...], ...]


class OpHandle:
    """A weak, hashable handle on a bound function, for the primitive's parameters.

    Each bound function owns exactly one; handles compare by identity.
    """

    __slots__ = ("_ref", "name", "__weakref__")

    def __init__(self, op: "BoundFunction"):
        self._ref = weakref.ref(op)
        self.name = op.name

    def get(self) -> "BoundFunction":
        op = self._ref()
        if op is None:
            raise ReferenceError(
                f"xlabind: the bound function '{self.name}' was garbage-collected while a "
                f"traced program still refers to it. Keep a reference to it for as long as "
                f"you trace, lower or transform programs that use it (compiled executables "
                f"keep what they need themselves).")
        return op

    def __repr__(self) -> str:
        return self.name


@dataclasses.dataclass(frozen=True)
class Call:
    """The parameters of one `xlabind_call` equation."""

    op: OpHandle
    kwargs: StaticKwargs
    out_tree: Any  # a PyTreeDef
    result_avals: tuple[jax.core.ShapedArray, ...]
    #: Under vmap_method="native": each operand's batch axes, one entry per vmap level.
    batch_axes: BatchAxes | None = None
    #: Under vmap_method="native": each result's batch axes, one entry per vmap level.
    out_batch_axes: BatchAxes | None = None
    #: With a sharding rule: each operand's factor per dimension (sharding.py).
    factors: tuple[tuple[str, ...], ...] | None = None
    #: With a sharding rule: each result's factor per dimension.
    out_factors: tuple[tuple[str, ...], ...] | None = None

    @property
    def fn(self) -> "BoundFunction":
        return self.op.get()

    def replace(self, **changes) -> "Call":
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        parts = [repr(self.op)]
        if self.kwargs:
            parts.append(f"kwargs={self.kwargs!r}")
        if self.batch_axes is not None:
            parts.append(f"batch_axes={self.batch_axes}")
        if self.factors is not None:
            parts.append("sharding=" + ", ".join(" ".join(f) for f in self.factors) + " -> "
                         + ", ".join(" ".join(f) for f in self.out_factors))
        return "Call(" + ", ".join(parts) + ")"


def bind(call: Call, operands: Sequence[Any]) -> list:
    """Binds the primitive; returns the flat results."""
    return xlabind_call_p.bind(*operands, call=call)


@xlabind_call_p.def_abstract_eval
def _abstract_eval(*operand_avals, call: Call):
    del operand_avals
    return list(call.result_avals)


@xlabind_call_p.def_impl
def _eager(*operands, call: Call):
    # Eager calls compile once per call signature, into a cache the bound
    # function owns (not jax's global primitive cache, which would keep the
    # user's function alive for good).
    with jax.disable_jit(False):
        return call.fn.eager_executable(call)(*operands)
