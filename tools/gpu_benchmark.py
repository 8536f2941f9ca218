"""What a CUDA callback through xlabind costs, next to the alternatives, in one run.

    python3 tools/gpu_benchmark.py [--json FILE] [--quick]

Run by tools/gpu_check.py on the GPU machine, with the extension it built.
Every case is a jitted function of one float32 array on the GPU, timed as
``f(x).block_until_ready()``, at n = 1, 10^6 and 10^8:

  * native CUDA FFI calls (xlabind's no-op and copy handlers through
    ``jax.ffi.ffi_call``): the unit of the "vs native" column;
  * xlabind's CUDA callback: a no-op, a CuPy copy, a PyTorch (DLPack) copy,
    all in place;
  * ``jax.experimental.buffer_callback``: a no-op and a CuPy copy;
  * ``jax.pure_callback`` (an identity, through the host);
  * ``xlabind.ops.map_coordinates`` (CUDA kernels) against
    ``jax.scipy.ndimage.map_coordinates`` on 2^20 points in a 64^3 grid,
    order 1, float32 and float64: the values and the gradient in the grid;
  * a pipeline: a callback chained between two large XLA kernels (matmuls of
    2048^2), 10 calls dispatched and then awaited, against the same program
    with the callback replaced by a native copy. A callback that blocks the
    host (a stream or device synchronization) makes the dispatch wait for the
    first kernel every call: the dispatch time shows it, and the total may
    too.

Cases are interleaved, each timed call alone; medians of one run. A slow case
(pure_callback at 10^8) stops after a time budget. Nothing asserts on the
numbers: the summary lines say how they compare with the GPU issue's targets.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

import xlabind
from xlabind._runtime import extension as _extension

SIZES = (1, 10**6, 10**8)
GPU = ("cuda",)


def _like(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def cases(n: int) -> dict[str, Callable]:
    import cupy as cp

    out: dict[str, Callable] = {}
    out["native no-op"] = lambda x: jax.ffi.ffi_call(_extension.NOOP_TARGET, _like(x))(x)
    out["native copy"] = lambda x: jax.ffi.ffi_call("xlabind_cuda_copy", _like(x))(x)

    def noop(x, *, out):
        pass

    def cupy_copy(x, *, out):
        cp.copyto(cp.asarray(out), cp.asarray(x))

    out["xlabind no-op"] = xlabind.callback(noop, lambda x: x, in_place=True, platforms=GPU)
    out["xlabind CuPy copy"] = xlabind.callback(cupy_copy, lambda x: x, in_place=True,
                                                platforms=GPU)
    try:
        import torch

        def torch_copy(x, *, out):
            torch.from_dlpack(out).copy_(torch.from_dlpack(x))

        out["xlabind DLPack/PyTorch copy"] = xlabind.callback(torch_copy, lambda x: x,
                                                              in_place=True, platforms=GPU)
    except ImportError:
        pass
    try:
        from jax.experimental.buffer_callback import buffer_callback

        def bc_copy(ctx, result, x):
            with cp.cuda.ExternalStream(ctx.stream):
                cp.copyto(cp.asarray(result), cp.asarray(x))

        out["buffer_callback no-op"] = lambda x: buffer_callback(lambda ctx, r, x: None,
                                                                 _like(x))(x)
        out["buffer_callback + CuPy copy"] = lambda x: buffer_callback(bc_copy, _like(x))(x)
    except ImportError:
        pass
    out["pure_callback identity"] = lambda x: jax.pure_callback(np.asarray, _like(x), x)
    return {name: jax.jit(fn) for name, fn in out.items()}


def time_cases(fns: dict[str, Callable], x, rounds: int, budget_s: float) -> dict[str, list]:
    for fn in fns.values():  # compile and warm up; check each case runs
        for _ in range(3):
            fn(x).block_until_ready()
    times: dict[str, list] = {name: [] for name in fns}
    spent = dict.fromkeys(fns, 0.0)
    names = list(fns)
    for _ in range(rounds):
        random.shuffle(names)
        for name in names:
            if spent[name] > budget_s and len(times[name]) >= 5:
                continue
            start = time.perf_counter()
            fns[name](x).block_until_ready()
            elapsed = time.perf_counter() - start
            times[name].append(elapsed)
            spent[name] += elapsed
    return times


def map_coordinates_rows(rounds: int, budget_s: float) -> list[dict]:
    """jax's map_coordinates / xlabind's, forward and gradient in the grid."""
    from jax.scipy.ndimage import map_coordinates as jax_map

    from xlabind.ops import map_coordinates as ours

    jax.config.update("jax_enable_x64", True)  # for the float64 grid; earlier cases are float32
    gpu = jax.devices("gpu")[0]
    rows = []
    for dtype in (np.float32, np.float64):
        rng = np.random.default_rng(64)
        grid = jax.device_put(rng.standard_normal((64, 64, 64)).astype(dtype), gpu)
        coords = [jax.device_put(rng.uniform(0.0, 63.0, 1 << 20).astype(dtype), gpu)
                  for _ in range(3)]
        fns = {}
        for who, fn in (("jax", jax_map), ("xlabind", ours)):
            # The coordinates are arguments: as constants, XLA would fold the
            # gradient (which does not depend on the grid) at compile time.
            values = jax.jit(lambda g, c, fn=fn: fn(g, c, 1))
            grad = jax.jit(jax.grad(lambda g, c, fn=fn: jnp.sum(fn(g, c, 1))))
            fns[f"map_coordinates {who}"] = lambda g, f=values: f(g, coords)
            fns[f"map_coordinates grad {who}"] = lambda g, f=grad: f(g, coords)
        tol = 1e-4 if dtype == np.float32 else 1e-10
        for what in ("map_coordinates", "map_coordinates grad"):
            np.testing.assert_allclose(np.asarray(fns[f"{what} xlabind"](grid)),
                                       np.asarray(fns[f"{what} jax"](grid)), rtol=tol, atol=tol,
                                       err_msg=what)
        times = time_cases(fns, grid, rounds, budget_s)
        for what in ("map_coordinates", "map_coordinates grad"):
            theirs = statistics.median(times[f"{what} jax"])
            mine = statistics.median(times[f"{what} xlabind"])
            rows.append({"case": what, "dtype": np.dtype(dtype).name, "jax_us": theirs * 1e6,
                         "xlabind_us": mine * 1e6, "jax_over_xlabind": theirs / mine})
    return rows


def pipeline_rows(rounds: int) -> list[dict]:
    """heavy -> copy -> heavy, with the copy native or a callback; 10 calls
    dispatched, then awaited. The host time of the dispatch loop is what a
    host-blocking callback inflates."""
    import cupy as cp

    gpu = jax.devices("gpu")[0]
    x = jax.device_put(jnp.asarray(np.random.default_rng(7).random((2048, 2048),
                                                                   np.float32) / 2048), gpu)

    def heavy(a):
        return jnp.tanh(a @ a)

    def cupy_in_place(a, *, out):
        cp.copyto(cp.asarray(out), cp.asarray(a))

    copies = {
        "native copy": lambda a: jax.ffi.ffi_call("xlabind_cuda_copy", _like(a))(a),
        "xlabind CuPy in place": xlabind.callback(cupy_in_place, lambda a: a, in_place=True,
                                                  platforms=GPU),
        "xlabind CuPy returned": xlabind.callback(lambda a: cp.asarray(a) * 1, lambda a: a,
                                                  platforms=GPU),
    }
    try:
        import torch

        copies["xlabind PyTorch returned (DLPack)"] = xlabind.callback(
            lambda a: torch.from_dlpack(a).clone(), lambda a: a, platforms=GPU)
    except ImportError:
        pass
    programs = {name: jax.jit(lambda a, c=copy: heavy(c(heavy(a)))) for name, copy in
                copies.items()}
    expected = np.asarray(programs["native copy"](x))
    for name, program in programs.items():
        np.testing.assert_allclose(np.asarray(program(x)), expected, rtol=1e-5, err_msg=name)
    dispatch: dict[str, list] = {name: [] for name in programs}
    total: dict[str, list] = {name: [] for name in programs}
    names = list(programs)
    for _ in range(max(3, rounds // 20)):
        random.shuffle(names)
        for name in names:
            jax.block_until_ready(programs[name](x))
            start = time.perf_counter()
            outs = [programs[name](x) for _ in range(10)]
            dispatched = time.perf_counter()
            jax.block_until_ready(outs)
            dispatch[name].append(dispatched - start)
            total[name].append(time.perf_counter() - start)
    native_dispatch = statistics.median(dispatch["native copy"])
    native_total = statistics.median(total["native copy"])
    return [{"case": name, "dispatch_ms": statistics.median(dispatch[name]) * 1e3,
             "total_ms": statistics.median(total[name]) * 1e3,
             "dispatch_vs_native": statistics.median(dispatch[name]) / native_dispatch,
             "total_vs_native": statistics.median(total[name]) / native_total}
            for name in programs]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--quick", action="store_true", help="few rounds (a smoke test)")
    args = parser.parse_args()
    rounds, budget = (20, 1.0) if args.quick else (300, 6.0)
    gpu = jax.devices("gpu")[0]
    rows = []
    for n in SIZES:
        x = jax.device_put(jnp.asarray(np.random.default_rng(n).random(n, np.float32)), gpu)
        fns = cases(n)
        expected = np.asarray(x)
        for name in ("native copy", "xlabind CuPy copy", "xlabind DLPack/PyTorch copy",
                     "buffer_callback + CuPy copy", "pure_callback identity"):
            if name in fns:  # a broken case is not timed
                np.testing.assert_array_equal(np.asarray(fns[name](x)), expected, err_msg=name)
        times = time_cases(fns, x, rounds, budget)
        floor = statistics.median(times["native no-op"])
        for name, samples in times.items():
            median = statistics.median(samples)
            rows.append({"case": name, "n": n, "median_us": median * 1e6,
                         "vs_native_noop": median / floor, "calls": len(samples)})
        del x, fns
    print(f"{'case':34} {'n':>10} {'median µs':>12} {'vs native no-op':>16}")
    print("-" * 75)
    for row in rows:
        print(f"{row['case']:34} {row['n']:>10} {row['median_us']:>12.1f} "
              f"{row['vs_native_noop']:>16.2f}")
    by = {(r["case"], r["n"]): r["median_us"] for r in rows}
    print()
    for n in SIZES:
        if ("buffer_callback no-op", n) in by:
            print(f"xlabind no-op / buffer_callback no-op at n={n} (target ≤ 1): "
                  f"{by[('xlabind no-op', n)] / by[('buffer_callback no-op', n)]:.3f}")
    print(f"xlabind CuPy copy / native copy at n=10^8 (target ≤ 1.2): "
          f"{by[('xlabind CuPy copy', 10**8)] / by[('native copy', 10**8)]:.3f}")
    pipeline = pipeline_rows(rounds)
    print(f"\n{'heavy -> copy -> heavy, 10 calls':34} {'dispatch ms':>12} {'total ms':>9} "
          f"{'dispatch/native':>16} {'total/native':>13}")
    for row in pipeline:
        print(f"{row['case']:34} {row['dispatch_ms']:>12.2f} {row['total_ms']:>9.2f} "
              f"{row['dispatch_vs_native']:>16.2f} {row['total_vs_native']:>13.2f}")
    print("(a callback that blocks the host shows as a dispatch far slower than native's)")
    interpolation = map_coordinates_rows(rounds, budget)
    print(f"\n{'2^20 points, 64^3 grid, order 1':34} {'dtype':>8} {'jax µs':>10} "
          f"{'xlabind µs':>11} {'jax / xlabind':>14}")
    for row in interpolation:
        print(f"{row['case']:34} {row['dtype']:>8} {row['jax_us']:>10.1f} "
              f"{row['xlabind_us']:>11.1f} {row['jax_over_xlabind']:>14.2f}")
    print(f"jax {jax.__version__}, {gpu.device_kind}, {rounds} rounds")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "pipeline": pipeline, "map_coordinates": interpolation,
                       "jax": jax.__version__, "device": gpu.device_kind}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
