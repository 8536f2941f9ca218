"""The benchmark's TPU rows for xlabind.ops: map_coordinates on random points
of a float32 grid, at the sizes users have (2^20 and 2^24 points, as a flat
(3, points) array and image-shaped (3, H, W)), against
jax.scipy.ndimage.map_coordinates in the same run (order 1, its grid
gradient), and order 3 with its prefilter against xlabind's own order 1.
Each program's first call (trace, lower, compile, run) is timed once; then
the programs are timed interleaved and a row is a median.
tools/tpu_check.py runs it on the TPU machine."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np
from tpu_calls import interleaved_medians

from xlabind.ops import map_coordinates

MODE = "nearest"
#: (grid size, coordinates' shape after the leading 3): flat and image-shaped.
CASES = (
    (64, (2**20,)),
    (256, (2**20,)),
    (64, (1024, 1024)),
    (64, (2**24,)),
    (256, (2**24,)),
    (64, (4096, 4096)),
)
#: Which row each ratio compares with.
SPEEDUPS = {
    "xlabind order 1": ("jax order 1", "x faster than jax"),
    "xlabind order 1, grid gradient": ("jax order 1, grid gradient", "x faster than jax"),
    "xlabind order 3 + prefilter": ("xlabind order 1", "x xlabind order 1"),
}


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


def _first_calls(programs: dict[str, Callable], args) -> dict[str, float | str]:
    """Seconds of each program's first call, or why it failed."""
    first: dict[str, float | str] = {}
    for name, f in programs.items():
        start = time.perf_counter()
        try:
            jax.block_until_ready(f(*args))
            first[name] = time.perf_counter() - start
        except Exception as error:
            first[name] = f"failed: {type(error).__name__}: {str(error)[:160]}"
    return first


def table_lines(rounds: int = 5) -> Iterator[str]:
    yield f"| grid (float32) | points (mode {MODE}) | case | ms | first call s | ratio |"
    yield "| --- | --- | --- | --- | --- | --- |"
    for n, shape in CASES:
        key = jax.random.PRNGKey(n)
        grid = jax.random.normal(key, (n, n, n), jnp.float32)
        coords = jax.random.uniform(key, (3, *shape), jnp.float32, 0, n - 1)
        programs = _programs(n)
        first = _first_calls(programs, (grid, coords))
        if all(isinstance(first[k], float) for k in ("xlabind order 1", "jax order 1")):
            # The same values as jax's (order 1) before anything is timed.
            np.testing.assert_allclose(
                programs["xlabind order 1"](grid, coords),
                programs["jax order 1"](grid, coords),
                rtol=1e-4,
                atol=1e-4,
            )
        ms = interleaved_medians(
            {k: f for k, f in programs.items() if isinstance(first[k], float)},
            (grid, coords),
            rounds,
        )
        points = "x".join(str(d) for d in shape)
        for name, seconds in first.items():
            value = ms.get(name, seconds)
            if isinstance(value, str):
                yield f"| {n}^3 | {points} | {name} | {value} | | |"
                continue
            ratio = ""
            if name in SPEEDUPS and isinstance(ms.get(SPEEDUPS[name][0]), float):
                base, label = SPEEDUPS[name]
                r = ms[base] / value if "faster" in label else value / ms[base]
                ratio = f"{r:.1f}{label}"
            yield f"| {n}^3 | {points} | {name} | {value:.2f} | {seconds:.1f} | {ratio} |"
        del grid, coords
