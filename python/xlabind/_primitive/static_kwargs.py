"""Static keyword arguments: hashable, compared by type and value all the way down.

They become part of a primitive's parameters, so jit can cache on them, and
reach the callback as the very Python objects the caller passed. Two values
are the same static argument only if they cannot be told apart: the same
type at every level, floats by their bits (so 0.0 and -0.0 differ, and a NaN
equals itself), containers element by element. A dict (a structured FFI
attribute, nested options) is kept as a read-only copy, a FrozenDict, so that
changing the caller's dict afterwards changes nothing already traced.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from typing import Any

import jax
import numpy as np


class FrozenDict(Mapping[str, Any]):
    """A read-only, hashable copy of a dict with string keys (nested dicts
    frozen too): how a dict keyword argument reaches a Python callback."""

    __slots__ = ("_items", "_key", "_hash")

    def __init__(self, items: Mapping[str, Any]):
        self._items = {k: freeze(v) for k, v in items.items()}
        self._key = canonical_key(self)
        self._hash = hash(self._key)

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenDict):
            return bool(self._key == other._key)
        return isinstance(other, Mapping) and bool(self._key == canonical_key(other))

    def __repr__(self) -> str:
        return f"FrozenDict({self._items!r})"

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[str, Any]]]:
        # Rebuilt, not restored: the hash of strings differs between processes.
        return (FrozenDict, (dict(self._items),))


def freeze(value: Any) -> Any:
    """`value`, with every dict in it (inside dicts and tuples, at any depth) a
    FrozenDict."""
    if isinstance(value, Mapping) and not isinstance(value, FrozenDict):
        return FrozenDict(value)
    if type(value) is tuple:
        frozen = tuple(freeze(v) for v in value)
        return frozen if any(a is not b for a, b in zip(frozen, value)) else value
    return value


def canonical_key(value: Any) -> Any:
    """A hashable key equal for two values exactly when they are indistinguishable."""
    kind = type(value)
    if isinstance(value, np.generic):  # before float: np.float64 subclasses float
        return (kind, value.dtype.str, value.tobytes())
    if isinstance(value, float):
        return (kind, struct.pack("<d", value))
    if isinstance(value, complex):
        return (kind, struct.pack("<dd", value.real, value.imag))
    if isinstance(value, tuple):
        return (kind, tuple(canonical_key(v) for v in value))
    if isinstance(value, frozenset):
        return (kind, frozenset(canonical_key(v) for v in value))
    if isinstance(value, Mapping):  # any mapping: a dict and its frozen copy are one argument
        # Keys by their own canonical keys, so 1, 1.0 and True are three keys;
        # ordered by repr, which any mix of key types has.
        return (
            dict,
            tuple(
                sorted(((canonical_key(k), canonical_key(v)) for k, v in value.items()), key=repr)
            ),
        )
    return (kind, value)


def _unhashable_part(name: str, value: Any) -> tuple[str, Any]:
    """The dotted name and value of what makes `value` unhashable, inside dicts."""
    if isinstance(value, Mapping):
        for key, inner in value.items():
            try:
                hash(canonical_key(inner))
            except TypeError:
                return _unhashable_part(f"{name}.{key}", inner)
    return name, value


class StaticKwargs:
    """An immutable mapping of keyword arguments that is safe to hash."""

    __slots__ = ("_items", "_key", "_hash")

    def __init__(self, items: tuple[tuple[str, Any], ...] = ()):
        self._items = items
        self._key = tuple((k, canonical_key(v)) for k, v in items)
        self._hash = hash(self._key)

    @classmethod
    def from_call(cls, fn_name: str, kwargs: Mapping[str, Any]) -> StaticKwargs:
        """Validates a call's keyword arguments, raising a TypeError that says how to fix it."""
        for key, value in kwargs.items():
            if isinstance(value, jax.core.Tracer):
                raise TypeError(
                    f"{fn_name}: keyword argument '{key}' is a traced JAX array, but keyword "
                    f"arguments are static Python values that reach the callback unchanged. "
                    f"Pass arrays as positional arguments instead."
                )
            try:
                hash(canonical_key(value))
            except TypeError:
                where, leaf = _unhashable_part(key, value)
                raise TypeError(
                    f"{fn_name}: keyword argument '{where}' must be hashable to serve as a static "
                    f"argument, got unhashable {type(leaf).__name__}. Pass a tuple instead of "
                    f"a list or array, a frozenset instead of a set, or an array as a "
                    f"positional argument."
                ) from None
        return cls(tuple(sorted((k, freeze(v)) for k, v in kwargs.items())))

    def as_dict(self) -> dict[str, Any]:
        return dict(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StaticKwargs) and self._key == other._key

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k}={v!r}" for k, v in self._items) + "}"
