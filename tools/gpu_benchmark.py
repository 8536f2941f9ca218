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
  * ``jax.pure_callback`` (an identity, through the host).

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
from xlabind import _extension

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
    print(f"jax {jax.__version__}, {gpu.device_kind}, {rounds} rounds")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "jax": jax.__version__, "device": gpu.device_kind}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
