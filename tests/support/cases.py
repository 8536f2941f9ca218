"""Which cases of a combinatorial product (`product`), or of a test's
listed cases (`some`), a test runs: all of them, or a fixed, seeded sample
(as jax's own suite samples with JAX_NUM_GENERATED_CASES).

XLABIND_TEST_CASES says which: "sampled" in the default `bazel test //...`
(.bazelrc), "all" under `bazel test --config=all //...` (CI) and wherever the
variable is unset (pytest by hand, the device runbooks): every case still
runs in CI, and the five-minute loop runs a sample of each product that
holds every value of every axis at least once.

A sampled case is an ordinary pytest parameter: a failing one is named by
its id (`test_values[3-wrap-(9, 8, 7)]`), and the same id fails again under
`--config=all` and by hand, since the sample is drawn from the test's name
alone (no clock, no process-wide random state)."""

import itertools
import os
import random
import zlib

import numpy as np
import pytest

ALL = os.environ.get("XLABIND_TEST_CASES", "all") != "sampled"


def _name(value) -> str:
    """A value as its id names it: a dtype by its name (float32), the rest as str."""
    try:
        return np.dtype(value).name if isinstance(value, type) else str(value)
    except TypeError:
        return str(value)


def product(name: str, *axes, sampled: int = 0, keep=None, ids=_name):
    """pytest parameters for every combination of `axes` (one tuple each)
    that `keep(*combination)` accepts (all without it), or, in the sampled
    loop, `sampled` of them (at least enough to take every value of every
    axis once), the same ones on every run. `name` seeds the draw: the
    test's name, so that two tests draw apart."""
    combos = [c for c in itertools.product(*axes) if keep is None or keep(*c)]
    if not ALL:
        combos = _covering_sample(combos, len(axes), sampled, name)
    return [pytest.param(*combo, id="-".join(ids(v) for v in combo)) for combo in combos]


def some(name: str, values: list, sampled: int) -> list:
    """A test's listed cases, `values` (each one path of the code, not a
    product): all of them, or, in the sampled loop, `sampled` of them drawn
    by `name`, in their listed order."""
    if ALL:
        return list(values)
    drawn = _shuffled(range(len(values)), name)[:sampled]
    return [value for i, value in enumerate(values) if i in drawn]


def repeats(full: int, sampled: int) -> int:
    """How many times a test repeats a run that races (every run in CI,
    `sampled` in the loop)."""
    return full if ALL else min(full, sampled)


def _covering_sample(combos, width, size, name):
    """`size` combos in a fixed random order, first those that take a value
    of an axis not yet taken: every value of every axis at least once."""
    order = _shuffled(combos, name)
    seen, chosen = set(), []
    for combo in order:
        new = {(axis, repr(combo[axis])) for axis in range(width)} - seen
        if new:
            seen |= new
            chosen.append(combo)
    rest = [combo for combo in order if combo not in chosen]
    chosen += rest[: max(0, size - len(chosen))]
    # Back in the product's order: the ids read as a sorted table.
    return sorted(chosen, key=combos.index)


def _shuffled(items, name: str) -> list:
    """`items` in the fixed random order that `name` seeds."""
    order = list(items)
    random.Random(zlib.crc32(name.encode())).shuffle(order)
    return order
