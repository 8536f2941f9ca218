"""Static keyword arguments: hashable, compared by type and value.

They become part of a primitive's parameters, so jit can cache on them, and
reach the callback as the very Python objects the caller passed.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax


class StaticKwargs:
    """An immutable mapping of keyword arguments that is safe to hash."""

    __slots__ = ("_items", "_hash")

    def __init__(self, items: tuple[tuple[str, Any], ...] = ()):
        self._items = items
        # The type takes part, so f(x, n=1) and f(x, n=1.0) stay distinct.
        self._hash = hash(tuple((k, type(v), v) for k, v in items))

    @classmethod
    def from_call(cls, fn_name: str, kwargs: Mapping[str, Any]) -> "StaticKwargs":
        """Validates a call's keyword arguments, raising a TypeError that says how to fix it."""
        for key, value in kwargs.items():
            if isinstance(value, jax.core.Tracer):
                raise TypeError(
                    f"{fn_name}: keyword argument '{key}' is a traced JAX array, but keyword "
                    f"arguments are static Python values that reach the callback unchanged. "
                    f"Pass arrays as positional arguments instead.")
            try:
                hash(value)
            except TypeError:
                raise TypeError(
                    f"{fn_name}: keyword argument '{key}' must be hashable to serve as a static "
                    f"argument, got unhashable {type(value).__name__}. Pass a tuple instead of "
                    f"a list or array, a frozenset instead of a set, or an array as a "
                    f"positional argument.") from None
        return cls(tuple(sorted(kwargs.items())))

    def as_dict(self) -> dict[str, Any]:
        return dict(self._items)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StaticKwargs) or self._hash != other._hash:
            return False
        if len(self._items) != len(other._items):
            return False
        return all(k1 == k2 and type(v1) is type(v2) and v1 == v2
                   for (k1, v1), (k2, v2) in zip(self._items, other._items))

    def __repr__(self) -> str:
        return "StaticKwargs(" + ", ".join(f"{k}={v!r}" for k, v in self._items) + ")"
