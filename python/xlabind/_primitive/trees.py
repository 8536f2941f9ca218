"""Result trees of derived functions (transposes, JVPs): one array or a tuple."""

from collections.abc import Iterable
from typing import Any

import jax


def flat_results_tree(n: int) -> jax.tree_util.PyTreeDef:
    """The tree of n results: a bare array when n == 1, else an n-tuple."""
    leaf = object()
    return jax.tree_util.tree_structure(leaf if n == 1 else (leaf,) * n)


def interleave(
    n: int, fixed_positions: Iterable[int], fixed_values: Iterable[Any], other_values: Iterable[Any]
) -> list[Any]:
    """n values: `fixed_values` at `fixed_positions`, `other_values` elsewhere, in order."""
    fixed = dict(zip(fixed_positions, fixed_values))
    others = iter(other_values)
    return [fixed[i] if i in fixed else next(others) for i in range(n)]
