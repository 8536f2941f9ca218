"""The benchmark's TPU rows for xlabind.ops: map_coordinates on random points
of a float32 grid, at the sizes users have (2^20 and 2^24 points, as a flat
(d, points) array and image-shaped (d, H, W), on 3-D and 2-D grids), against
jax.scipy.ndimage.map_coordinates in the same run (order 1, its grid and
coordinate gradients), and order 3 with its prefilter against xlabind's own
order 1 (at 256^3 through the patch kernels, one per chunk of axis 2). Each
program's first call is timed once and split into lowering (trace and
lower), compiling and the first run; then the programs are timed
interleaved and a row is a median.

    python3 tools/benchmarks/tpu_ops.py [--cases calls 0 3 ...]

prints the TPU rows as Markdown, each as it is measured: the cost of a call
(tpu_calls.py; `calls`) and the cases of CASES (by index); all of them by
default. tools/device_check.py runs it on the TPU machine."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Iterator

# The machine's device, in jax's float32 default (harness.py).
os.environ.setdefault("JAX_PLATFORMS", "")

import tpu_calls
from harness import interleaved_medians, jax, jnp, markdown_table, np

from xlabind.ops import map_coordinates

MODE = "nearest"
#: (grid shape, coordinates' shape after the leading len(grid)): flat and
#: image-shaped points, 2^20 (and an image 1000 wide) then 2^24 of them.
CASES = (
    ((64, 64, 64), (2**20,)),
    ((64, 64, 64), (1024, 1024)),
    ((256, 256, 256), (2**20,)),
    ((1024, 1024), (2**20,)),
    ((1024, 1024), (1024, 1024)),
    ((1024, 1024), (1024, 1000)),
    ((64, 64, 64), (2**24,)),
    ((64, 64, 64), (4096, 4096)),
    ((256, 256, 256), (2**24,)),
    ((1024, 1024), (2**24,)),
    ((1024, 1024), (4096, 4096)),
)
#: Which row each ratio compares with.
SPEEDUPS = {
    "xlabind order 1": ("jax order 1", "x faster than jax"),
    "xlabind order 1, grid gradient": ("jax order 1, grid gradient", "x faster than jax"),
    "xlabind order 1, coordinate gradient": (
        "jax order 1, coordinate gradient",
        "x faster than jax",
    ),
    "xlabind order 3 + prefilter": ("xlabind order 1", "x xlabind order 1"),
}


def _programs(grid_shape: tuple[int, ...]) -> dict[str, Callable]:
    def ours(order):
        return lambda g, c: map_coordinates(g, list(c), order, MODE)

    def theirs(g, c):
        return jax.scipy.ndimage.map_coordinates(g, list(c), 1, MODE)

    def gradient(f, argnum):
        return jax.grad(lambda g, c: f(g, c).sum(), argnum)

    programs = {
        "jax order 1": theirs,
        "xlabind order 1": ours(1),
        "jax order 1, grid gradient": gradient(theirs, 0),
        "xlabind order 1, grid gradient": gradient(ours(1), 0),
        "jax order 1, coordinate gradient": gradient(theirs, 1),
        "xlabind order 1, coordinate gradient": gradient(ours(1), 1),
    }
    programs["xlabind order 3 + prefilter"] = ours(3)
    return {name: jax.jit(f) for name, f in programs.items()}


def _first_calls(programs: dict[str, Callable], args) -> dict[str, tuple[float, ...] | str]:
    """Each program's first call as (lower s, compile s, run s), or why it
    failed; the compiled programs replace the jitted ones in `programs`."""
    first: dict[str, tuple[float, ...] | str] = {}
    for name, f in list(programs.items()):
        try:
            start = time.perf_counter()
            lowered = f.lower(*args)
            lowered_at = time.perf_counter()
            compiled = lowered.compile()
            compiled_at = time.perf_counter()
            jax.block_until_ready(compiled(*args))
            ran_at = time.perf_counter()
            first[name] = (lowered_at - start, compiled_at - lowered_at, ran_at - compiled_at)
            programs[name] = compiled
        except Exception as error:
            first[name] = f"failed: {type(error).__name__}: {str(error)[:160]}"
    return first


def table_lines(rounds: int = 5, cases: tuple = CASES) -> Iterator[str]:
    header = [
        "grid (float32)",
        f"points (mode {MODE})",
        "case",
        "ms",
        "first call s (lower + compile + run)",
        "ratio",
    ]
    yield from markdown_table(header, _rows(rounds, cases))


def _rows(rounds: int, cases: tuple) -> Iterator[list]:
    for grid_shape, shape in cases:
        key = jax.random.PRNGKey(len(shape) + grid_shape[0])
        grid = jax.random.normal(key, grid_shape, jnp.float32)
        coords = jax.random.uniform(
            key, (len(grid_shape), *shape), jnp.float32, 0, min(grid_shape) - 1
        )
        programs = _programs(grid_shape)
        first = _first_calls(programs, (grid, coords))
        if all(isinstance(first[k], tuple) for k in ("xlabind order 1", "jax order 1")):
            # The same values as jax's (order 1) before anything is timed.
            np.testing.assert_allclose(
                programs["xlabind order 1"](grid, coords),
                programs["jax order 1"](grid, coords),
                rtol=1e-4,
                atol=1e-4,
            )
        ms = interleaved_medians(
            {k: f for k, f in programs.items() if isinstance(first[k], tuple)},
            (grid, coords),
            rounds if shape[0] * (shape[1] if len(shape) > 1 else 1) <= 2**20 else 3,
        )
        where = ("x".join(map(str, grid_shape)), "x".join(map(str, shape)))
        for name, seconds in first.items():
            value = ms.get(name, seconds)
            if isinstance(value, str) or isinstance(seconds, str):
                yield [*where, name, value, "", ""]
                continue
            ratio = ""
            if name in SPEEDUPS and isinstance(ms.get(SPEEDUPS[name][0]), float):
                base, label = SPEEDUPS[name]
                r = ms[base] / value if "faster" in label else value / ms[base]
                ratio = f"{r:.1f}{label}"
            split = " + ".join(f"{s:.1f}" for s in seconds)
            yield [*where, name, f"{value:.2f}", f"{sum(seconds):.1f} ({split})", ratio]
        del grid, coords


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    choices = ["calls", *map(str, range(len(CASES)))]
    parser.add_argument("--cases", nargs="+", choices=choices, default=choices)
    parser.add_argument("--quick", action="store_true", help="3 rounds: a smoke test")
    args = parser.parse_args(argv)
    if "calls" in args.cases:
        print("\n## The cost of a call (medians)\n", flush=True)
        for line in tpu_calls.table_lines(3 if args.quick else 15):
            print(line, flush=True)
    ops = tuple(CASES[int(i)] for i in args.cases if i != "calls")
    if ops:
        print("\n## xlabind.ops on the chip (medians)\n", flush=True)
        for line in table_lines(3 if args.quick else 5, cases=ops):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
