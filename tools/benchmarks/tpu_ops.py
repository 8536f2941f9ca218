"""The benchmark's TPU rows for xlabind.ops: map_coordinates on 2^20 random
points of a float32 grid, against jax.scipy.ndimage.map_coordinates in the
same run (order 1, its grid gradient), and order 3 with its prefilter
against xlabind's own order 1. Programs are timed interleaved; a row is a
median. tools/tpu_check.py runs it on the TPU machine."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np
from tpu_calls import interleaved_medians

from xlabind.ops import map_coordinates

POINTS = 2**20
SIZES = (64, 256)
MODE = "nearest"


def _programs(n: int) -> dict[str, Callable]:
    def ours(order):
        return jax.jit(lambda g, c: map_coordinates(g, list(c), order, MODE))

    theirs = jax.jit(lambda g, c: jax.scipy.ndimage.map_coordinates(g, list(c), 1, MODE))

    def gradient(f):
        return jax.jit(jax.grad(lambda g, c: f(g, c).sum()))

    programs = {
        "jax order 1": theirs,
        "xlabind order 1": ours(1),
        "jax order 1, grid gradient": gradient(theirs),
        "xlabind order 1, grid gradient": gradient(ours(1)),
    }
    if n <= 64:
        programs["xlabind order 3 + prefilter"] = ours(3)
    return programs


def table_lines(rounds: int = 7) -> Iterator[str]:
    yield f"| grid (float32) | case ({POINTS} random points, mode {MODE}) | ms | ratio |"
    yield "| --- | --- | --- | --- |"
    for n in SIZES:
        key = jax.random.PRNGKey(n)
        grid = jax.random.normal(key, (n, n, n), jnp.float32)
        coords = jax.random.uniform(key, (3, POINTS), jnp.float32, 0, n - 1)
        programs = _programs(n)
        # The same values as jax's (order 1) before anything is timed.
        np.testing.assert_allclose(
            programs["xlabind order 1"](grid, coords),
            programs["jax order 1"](grid, coords),
            rtol=1e-4,
            atol=1e-4,
        )
        ms = interleaved_medians(programs, (grid, coords), rounds)
        speedups = {
            "xlabind order 1": ("jax order 1", "x faster than jax"),
            "xlabind order 1, grid gradient": ("jax order 1, grid gradient", "x faster than jax"),
            "xlabind order 3 + prefilter": ("xlabind order 1", "x xlabind order 1"),
        }
        for name, value in ms.items():
            if isinstance(value, str):
                yield f"| {n}^3 | {name} | {value} | |"
                continue
            ratio = ""
            if name in speedups and isinstance(ms.get(speedups[name][0]), float):
                base, label = speedups[name]
                r = ms[base] / value if "faster" in label else value / ms[base]
                ratio = f"{r:.1f}{label}"
            yield f"| {n}^3 | {name} | {value:.2f} | {ratio} |"
        del grid, coords
