"""What CUDA callbacks and xlabind's CUDA kernels cost on a GPU, next to the
alternatives, in one run.

    python3 tools/benchmarks/cuda_rows.py [--json FILE] [--quick] [--cases GROUP ...]

Run by tools/device_check.py on the GPU machine, against the installed wheel;
each group's table is printed as Markdown as soon as the group ends, and the
JSON rewritten. Each group runs in a process of its own (``--group``),
because XLA reads its flags once per process and PyTorch, once imported,
changes what every call does; every row names the flags it ran with.

  host       command buffers off (``--xla_gpu_enable_command_buffer=``), so
             every call is launched, never replayed. Three measurements of
             the same cases (xlabind's no-op and CuPy copy, in place;
             ``buffer_callback``'s no-op and CuPy copy; native FFI no-op and
             copy; ``pure_callback``), float32, n = 1 and 10^6:
             * host cost per call: K = 64 calls chained in one jitted
               function, its time divided by K, minus the same for a chain of
               native no-ops;
             * isolated latency: one ``f(x).block_until_ready()`` at a time;
             * throughput: 100 dispatches, then one wait, per call.
  graph      ``--xla_gpu_graph_min_graph_size=1``: a chain of 8 copies of
             10^8 floats captured into a CUDA graph and replayed, xlabind's
             CuPy copy (``command_buffer_compatible=True``) against the native
             copy; the Python calls during the timed replays are counted.
  torch      the PyTorch cases (DLPack), in the only process that imports it.
  kernels    device time of xlabind's CUDA map_coordinates and spline_filter,
             by CUDA events recorded on XLA's stream just before and after
             REPEATS runs of the operation, each on a copy of the arguments
             in buffers of its own (XLA merges runs on the same buffers),
             divided by REPEATS: the launch gaps at either end then count
             once per REPEATS runs, not once per run. Order 1 values and
             grid gradient against jax's, 2^24 points (2^22 to 2^26 without --quick),
             uniform-random and lattice coordinates, float32 and float64, on
             64^3 and 384^3 grids (with the bandwidth achieved as a share of
             the GPU's peak); order 3 with its prefilter on 64^3 and 256^3,
             and spline_filter on 256^3, against cupyx.scipy.ndimage (timed
             the same way: REPEATS calls between events on CuPy's stream).

Times are p10 / p50 / p90 over interleaved rounds (harness.py, as the CPU and
TPU rows); a group that outlives its time box is stopped and reported, the
others' tables stand. Nothing asserts on the
numbers; results are checked against the baseline before timing, and the
summary lines say how they compare with the GPU issue's targets.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import threading
import time
from collections.abc import Callable

# The machine's device, in jax's float32 default (harness.py).
os.environ.setdefault("JAX_PLATFORMS", "")

from harness import (
    WorkerFailed,
    chained,
    interleaved,
    jax,
    jnp,
    markdown_table,
    np,
    quantiles_us,
    run_worker,
    xlabind,
    xlabind_testing,
)

#: CuPy, imported by the worker that needs it (a group's process).
cp = None

#: In the order they run: what the GPU issues most need measured first.
GROUPS = ("host", "graph", "kernels", "torch")
FLAGS = {
    "host": "--xla_gpu_enable_command_buffer=",
    "graph": "--xla_gpu_graph_min_graph_size=1",
    "torch": "--xla_gpu_enable_command_buffer=",
    "kernels": "--xla_gpu_enable_command_buffer=",
}
#: HBM bandwidth of the GPUs the issue names, GB/s (by jax's device_kind).
PEAK_GBPS = {"NVIDIA H200": 4800.0, "NVIDIA H100 80GB HBM3": 3350.0}
CHAIN = 64
SIZES = (1, 10**6)
#: Each group's time box with --quick, and what it takes on the GPU machine
#: (--dry-run sleeps that long); without --quick, FULL_SECONDS.
QUICK_SECONDS = {"host": 50.0, "graph": 30.0, "kernels": 70.0, "torch": 40.0}
FULL_SECONDS = {"host": 300.0, "graph": 300.0, "kernels": 600.0, "torch": 300.0}
#: Runs of a kernel case between its two events. One run between them would
#: count the launch gaps before and after it (10-20 µs each, on both sides of
#: a comparison), pulling every ratio toward 1.
REPEATS = 8
#: The threads the xlabind no-op ran on (threading's names: XLA's own threads
#: are "Dummy-N"), reported with the host group.
CALLBACK_THREADS: set = set()


def _import_cupy() -> None:
    global cp
    import cupy as cp


def _like(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def _callbacks(torch=None) -> dict[str, Callable]:
    """The per-call cases, as functions of one array."""
    GPU = ("cuda",)
    out: dict[str, Callable] = {
        "native no-op": lambda x: jax.ffi.ffi_call(xlabind_testing.NOOP_TARGET, _like(x))(x),
        "native copy": lambda x: jax.ffi.ffi_call("xlabind_cuda_copy", _like(x))(x),
    }
    if torch is not None:

        def torch_copy(x, *, out):
            torch.from_dlpack(out).copy_(torch.from_dlpack(x))

        out["xlabind PyTorch copy (DLPack)"] = xlabind.callback(
            torch_copy, lambda x: x, in_place=True, platforms=GPU
        )
        out["xlabind PyTorch returned (DLPack)"] = xlabind.callback(
            lambda x: torch.from_dlpack(x).clone(), lambda x: x, platforms=GPU
        )
        return out

    def noop(x, *, out):
        CALLBACK_THREADS.add(threading.current_thread().name)

    def cupy_copy(x, *, out):
        cp.copyto(cp.asarray(out), cp.asarray(x))

    out["xlabind no-op"] = xlabind.callback(noop, lambda x: x, in_place=True, platforms=GPU)
    out["xlabind CuPy copy"] = xlabind.callback(
        cupy_copy, lambda x: x, in_place=True, platforms=GPU
    )
    out["xlabind CuPy returned"] = xlabind.callback(
        lambda x: cp.asarray(x).copy(), lambda x: x, platforms=GPU
    )
    try:
        from jax.experimental.buffer_callback import buffer_callback
    except ImportError:
        buffer_callback = None
    if buffer_callback is not None:

        class RawStream:  # the CUDA stream protocol, for CuPy 14's Stream.from_external
            def __init__(self, ptr):
                self.ptr = ptr

            def __cuda_stream__(self):
                return (0, self.ptr)

        def bc_copy(ctx, result, x):
            # buffer_callback installs no stream: its users must.
            stream = (
                cp.cuda.Stream.from_external(RawStream(ctx.stream))
                if hasattr(cp.cuda.Stream, "from_external")
                else cp.cuda.ExternalStream(ctx.stream)
            )
            with stream:
                cp.copyto(cp.asarray(result), cp.asarray(x))

        out["buffer_callback no-op"] = lambda x: buffer_callback(lambda ctx, r, x: None, _like(x))(
            x
        )
        out["buffer_callback + CuPy copy"] = lambda x: buffer_callback(bc_copy, _like(x))(x)
    out["pure_callback identity"] = lambda x: jax.pure_callback(np.asarray, _like(x), x)
    return out


COPIES = (
    "native copy",
    "xlabind CuPy copy",
    "xlabind CuPy returned",
    "buffer_callback + CuPy copy",
    "xlabind PyTorch copy (DLPack)",
    "xlabind PyTorch returned (DLPack)",
    "pure_callback identity",
)


def _interleaved(
    fns: dict[str, Callable], run: Callable, rounds: int, budget_s: float
) -> dict[str, list]:
    """run(fn) -> seconds, for each case in turn (harness.interleaved)."""
    return interleaved(
        {name: functools.partial(run, fn) for name, fn in fns.items()}, rounds, budget_s=budget_s
    )


def _isolated(fn, x) -> float:
    start = time.perf_counter()
    fn(x).block_until_ready()
    return time.perf_counter() - start


def _throughput(fn, x, calls: int = 100) -> float:
    start = time.perf_counter()
    outs = [fn(x) for _ in range(calls)]
    jax.block_until_ready(outs)
    return (time.perf_counter() - start) / calls


def per_call_group(quick: bool, torch=None) -> list[dict]:
    rounds, budget = (15, 1.0) if quick else (150, 5.0)
    gpu = jax.devices("gpu")[0]
    rows = []
    for n in SIZES:
        x = jax.device_put(jnp.asarray(np.random.default_rng(n).random(n, np.float32)), gpu)
        plain = _callbacks(torch)
        jitted = {name: jax.jit(fn) for name, fn in plain.items()}
        for name, fn in jitted.items():  # compile, warm up, check
            for _ in range(3):
                got = fn(x)
            if name in COPIES:
                np.testing.assert_array_equal(np.asarray(got), np.asarray(x), err_msg=name)
        chained = {
            name: chained(fn, CHAIN)
            for name, fn in plain.items()
            if name != "pure_callback identity" or n == 1
        }
        for fn in chained.values():
            fn(x).block_until_ready()
        isolated = _interleaved(jitted, lambda f, x=x: _isolated(f, x), rounds * 4, budget)
        throughput = _interleaved(
            jitted, lambda f, x=x: _throughput(f, x), max(5, rounds // 2), budget
        )
        chain = _interleaved(chained, lambda f, x=x: _isolated(f, x), rounds, budget)
        native_chain = statistics.median(chain["native no-op"]) / CHAIN
        for name in jitted:
            row = {
                "case": name,
                "n": n,
                "isolated_us": quantiles_us(isolated[name]),
                "throughput_us": quantiles_us(throughput[name]),
            }
            if name in chain:
                per_call = [t / CHAIN for t in chain[name]]
                row["chained_us"] = quantiles_us(per_call)
                row["host_cost_us"] = statistics.median(per_call) * 1e6 - native_chain * 1e6
            rows.append(row)
        del x
    return rows


def graph_group(quick: bool) -> list[dict]:
    """A chain of copies of 10^8 floats, captured and replayed."""
    rounds = 10 if quick else 50
    gpu = jax.devices("gpu")[0]
    n, k = 10**8, 8
    x = jax.device_put(jnp.arange(n, dtype=jnp.float32), gpu)
    python_calls = []

    def cupy_copy(a, *, out):
        python_calls.append(1)
        cp.copyto(cp.asarray(out), cp.asarray(a))

    cp.copyto(cp.empty(4, cp.float32), cp.ones(4, cp.float32))  # CuPy's kernel, compiled now
    fns = {
        "native copy": lambda a: jax.ffi.ffi_call("xlabind_cuda_copy", _like(a))(a),
        "xlabind CuPy copy": xlabind.callback(
            cupy_copy,
            lambda a: a,
            in_place=True,
            platforms=("cuda",),
            command_buffer_compatible=True,
        ),
    }
    chained = {name: chained(fn, k) for name, fn in fns.items()}
    for name, fn in chained.items():
        for _ in range(3):  # capture (after a warm-up run where XLA makes one)
            got = fn(x)
        np.testing.assert_array_equal(np.asarray(got[:1000]), np.arange(1000), err_msg=name)
    captured = len(python_calls)
    times = _interleaved(chained, lambda f: _isolated(f, x), rounds, 30.0)
    replay_calls = len(python_calls) - captured
    return [
        {
            "case": name,
            "n": n,
            "chain": k,
            "isolated_us": quantiles_us(times[name]),
            "per_copy_us": statistics.median(times[name]) / k * 1e6,
            "python_calls_while_timed": replay_calls if name != "native copy" else None,
            "python_calls_at_capture": captured if name != "native copy" else None,
        }
        for name in chained
    ]


# -- kernels: device time by CUDA events on XLA's stream ---------------------
def _event_markers():
    """(start, stop, events): in-place callbacks that record a CUDA event on
    XLA's stream (each returns a scalar nobody reads), and the events so far."""
    events: list = []

    def record(*xs, out):
        event = cp.cuda.Event()
        event.record()  # on the current stream: XLA's
        events.append(event)

    token = lambda *xs: jax.ShapeDtypeStruct((), jnp.int32)
    mark = xlabind.callback(record, token, in_place=True, platforms=("cuda",), name="event marker")
    return mark, events


def _timed_on_device(op: Callable, mark) -> Callable:
    """jit(copies -> (marker before, marker after)): op runs on each tuple of
    arguments in `copies` (_copies) between the markers."""

    def timed(copies):
        before = mark(copies[0][0])
        before, copies = jax.lax.optimization_barrier((before, copies))
        # Every result goes to the second marker, or XLA would drop the runs
        # nothing reads.
        results = [jax.tree_util.tree_leaves(op(*args))[0] for args in copies]
        after = mark(*results)  # once every result is there
        return before + after

    return jax.jit(timed)


def _copies(args: tuple, repeats: int) -> tuple:
    """`repeats` copies of `args`, each in buffers of its own: runs of one
    operation on equal arguments would be merged by XLA, on distinct buffers
    they cannot be."""
    return tuple(tuple(jnp.array(a, copy=True) for a in args) for _ in range(repeats))


def _device_times(
    cases: dict[str, Callable],
    args_of: dict[str, tuple],
    rounds: int,
    events: list,
    cupy_cases: dict[str, Callable],
    repeats: int = REPEATS,
) -> dict[str, list]:
    """Seconds of device time per run of each case, interleaved: the XLA
    cases' (_timed_on_device) over `repeats` runs between their two markers'
    events, cupyx's over `repeats` calls between events on CuPy's stream;
    each after two calls to compile and warm up."""
    copies: dict[tuple, tuple] = {}  # cases with the same arguments share copies
    for name in cases:
        key = tuple(id(a) for a in args_of[name])
        copies.setdefault(key, _copies(args_of[name], repeats))
    copies_of = {name: copies[tuple(id(a) for a in args_of[name])] for name in cases}

    def xla(name):
        def device_seconds():
            first = len(events)
            jax.block_until_ready(cases[name](copies_of[name]))
            start, stop = events[first], events[first + 1]
            seconds = cp.cuda.get_elapsed_time(start, stop) / 1e3 / repeats
            del events[first:]
            return seconds

        return device_seconds

    def cupy(fn):
        def device_seconds():
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            for _ in range(repeats):
                fn()
            stop.record()
            stop.synchronize()
            return cp.cuda.get_elapsed_time(start, stop) / 1e3 / repeats

        return device_seconds

    timed = {
        **{name: xla(name) for name in cases},
        **{name: cupy(fn) for name, fn in cupy_cases.items()},
    }
    for device_seconds in timed.values():
        for _ in range(2):
            device_seconds()
    events.clear()
    return _interleaved(timed, lambda device_seconds: device_seconds(), rounds, float("inf"))


def _coordinates(kind: str, shape: tuple, n: int, dtype, rng):
    if kind == "random":
        return [rng.uniform(0.0, s - 1.0, n).astype(dtype) for s in shape]
    side = round(n ** (1 / len(shape)))  # a lattice of side^3 points, in memory order
    axes = [np.linspace(0.0, s - 1.0, side, dtype=dtype) for s in shape]
    return [a.ravel() for a in np.meshgrid(*axes, indexing="ij")]


def kernels_group(quick: bool) -> list[dict]:
    import cupyx.scipy.ndimage as cupyx_ndimage
    from jax.scipy.ndimage import map_coordinates as jax_map

    from xlabind.ops import map_coordinates as ours
    from xlabind.ops import spline_filter as our_filter

    jax.config.update("jax_enable_x64", True)
    gpu = jax.devices("gpu")[0]
    peak = PEAK_GBPS.get(gpu.device_kind)
    mark, events = _event_markers()
    rounds = 7 if quick else 25
    rows = []
    point_counts = (1 << 24,) if quick else (1 << 22, 1 << 24, 1 << 26)
    # Each function jitted once, here: jax then compiles once per shape and
    # dtype (random and lattice coordinates share theirs), not once per loop.
    order1_timed, order1_plain = {}, {}
    for who, fn in (("jax", jax_map), ("xlabind", ours)):

        def values(g, *c, fn=fn):
            return fn(g, list(c), 1)

        def grid_grad(g, ct, *c, fn=fn):
            return jax.vjp(lambda g: fn(g, list(c), 1), g)[1](ct)[0]

        for what, f in (("values", values), ("grid gradient", grid_grad)):
            order1_timed[f"{what} {who}"] = _timed_on_device(f, mark)
            order1_plain[f"{what} {who}"] = jax.jit(f)
    order3_timed = _timed_on_device(lambda g, *c: ours(g, list(c), 3, mode="mirror"), mark)
    order3_plain = jax.jit(lambda g, *c: ours(g, list(c), 3, mode="mirror"))
    filter_timed = _timed_on_device(lambda g: our_filter(g, 3, mode="mirror"), mark)
    filter_plain = jax.jit(lambda g: our_filter(g, 3, mode="mirror"))
    for dtype in (np.float32, np.float64):
        rng = np.random.default_rng(64)
        tol = 2e-4 if dtype == np.float32 else 1e-9
        # Order 1 against jax.
        for side in (64, 384):
            grid_np = rng.standard_normal((side,) * 3).astype(dtype)
            grid = jax.device_put(grid_np, gpu)
            for n in point_counts:
                for kind in ("random", "lattice"):
                    coords = [
                        jax.device_put(c, gpu)
                        for c in _coordinates(kind, grid.shape, n, dtype, rng)
                    ]
                    n_actual = coords[0].shape[0]
                    cotangent = jax.device_put(rng.standard_normal(n_actual).astype(dtype), gpu)
                    cases, plain = order1_timed, order1_plain
                    args_of = {
                        f"{what} {who}": args
                        for who in ("jax", "xlabind")
                        for what, args in (
                            ("values", (grid, *coords)),
                            ("grid gradient", (grid, cotangent, *coords)),
                        )
                    }
                    for what in ("values", "grid gradient"):  # the same numbers first
                        args = args_of[f"{what} jax"]
                        np.testing.assert_allclose(
                            np.asarray(plain[f"{what} xlabind"](*args)),
                            np.asarray(plain[f"{what} jax"](*args)),
                            rtol=tol * (100 if what == "grid gradient" else 1),
                            atol=tol * (100 if what == "grid gradient" else 1),
                            err_msg=f"{what}, {kind} coordinates, {side}^3",
                        )
                    times = _device_times(cases, args_of, rounds, events, {})
                    itemsize = np.dtype(dtype).itemsize
                    for what in ("values", "grid gradient"):
                        theirs = statistics.median(times[f"{what} jax"])
                        mine = statistics.median(times[f"{what} xlabind"])
                        # Streams: coordinates in, values out (or cotangents in);
                        # 8 grid nodes read (or atomically added) per point.
                        moved = n_actual * itemsize * (3 + 1 + 8)
                        rows.append(
                            {
                                "group": "order 1",
                                "case": what,
                                "coordinates": kind,
                                "grid": side,
                                "points": n_actual,
                                "dtype": np.dtype(dtype).name,
                                "jax_us": quantiles_us(times[f"{what} jax"]),
                                "xlabind_us": quantiles_us(times[f"{what} xlabind"]),
                                "ratio": theirs / mine,
                                "xlabind_GBps": moved / mine / 1e9,
                                "share_of_peak": (moved / mine / 1e9 / peak) if peak else None,
                            }
                        )
                    del coords, cotangent
            del grid
        # Order 3 with its prefilter, and spline_filter, against cupyx.
        for side in (64, 256):
            grid_np = rng.standard_normal((side,) * 3).astype(dtype)
            grid = jax.device_put(grid_np, gpu)
            grid_cp = cp.asarray(grid_np)
            n = 1 << 24
            coords_np = _coordinates("random", grid.shape, n, dtype, rng)
            coords = [jax.device_put(c, gpu) for c in coords_np]
            coords_cp = cp.asarray(np.stack(coords_np))
            cases = {"order 3 xlabind": order3_timed}
            args_of = {"order 3 xlabind": (grid, *coords)}
            cupy_cases = {
                "order 3 cupyx": functools.partial(
                    cupyx_ndimage.map_coordinates, grid_cp, coords_cp, order=3, mode="mirror"
                )
            }
            got = np.asarray(order3_plain(grid, *coords))
            want = cp.asnumpy(cupy_cases["order 3 cupyx"]())
            np.testing.assert_allclose(
                got, want, rtol=10 * tol, atol=10 * tol, err_msg=f"order 3 {side}"
            )
            if side == 256:
                cases["spline_filter xlabind"] = filter_timed
                args_of["spline_filter xlabind"] = (grid,)
                cupy_cases["spline_filter cupyx"] = functools.partial(
                    cupyx_ndimage.spline_filter,
                    grid_cp,
                    order=3,
                    output=grid_cp.dtype,
                    mode="mirror",
                )
                np.testing.assert_allclose(
                    np.asarray(filter_plain(grid)),
                    cp.asnumpy(cupy_cases["spline_filter cupyx"]()),
                    rtol=10 * tol,
                    atol=10 * tol,
                    err_msg="spline_filter",
                )
            times = _device_times(cases, args_of, rounds, events, cupy_cases)
            for what in ("order 3", "spline_filter"):
                if f"{what} xlabind" not in times:
                    continue
                theirs = statistics.median(times[f"{what} cupyx"])
                mine = statistics.median(times[f"{what} xlabind"])
                rows.append(
                    {
                        "group": "order 3",
                        "case": what,
                        "coordinates": "random",
                        "grid": side,
                        "points": n if what == "order 3" else None,
                        "dtype": np.dtype(dtype).name,
                        "cupyx_us": quantiles_us(times[f"{what} cupyx"]),
                        "xlabind_us": quantiles_us(times[f"{what} xlabind"]),
                        "ratio": theirs / mine,
                    }
                )
            del grid, grid_cp, coords, coords_cp, cupy_cases
    return rows


def worker(group: str, quick: bool) -> dict:
    _import_cupy()
    if group == "torch":
        import torch

        rows = per_call_group(quick, torch=torch)
    elif group == "host":
        rows = per_call_group(quick)
    elif group == "graph":
        rows = graph_group(quick)
    else:
        rows = kernels_group(quick)
    device = jax.devices("gpu")[0]
    return {
        "group": group,
        "flags": os.environ.get("XLA_FLAGS", ""),
        "rows": rows,
        "jax": jax.__version__,
        "device": device.device_kind,
        "callback_threads": sorted(CALLBACK_THREADS),
    }


# -- the parent: every group, then the tables ---------------------------------
def run_group(group: str, quick: bool) -> dict:
    """One group in a process of its own, with its XLA flags, within its time
    box; a failure is reported in its place."""
    flags = (os.environ.get("XLA_FLAGS", "") + " " + FLAGS[group]).strip()
    env = {"XLA_FLAGS": flags}
    env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.5")
    box = 1.5 * (QUICK_SECONDS if quick else FULL_SECONDS)[group]
    start = time.perf_counter()
    args = ["--group", group, *(["--quick"] if quick else [])]
    try:
        report = run_worker(args, env, script=os.path.abspath(__file__), timeout=box)
    except WorkerFailed as error:
        report = {"group": group, "flags": flags, "error": str(error)[-2000:]}
    return {**report, "seconds": round(time.perf_counter() - start, 1)}


def write_json(path: str, reports: list[dict]) -> None:
    """Rewritten after every group: a run stopped later keeps what finished."""
    partial = path + ".partial"
    with open(partial, "w") as f:
        json.dump(reports, f, indent=1)
    os.replace(partial, path)


def _q(q: dict) -> str:
    return f"{q['p10']:.1f} / {q['p50']:.1f} / {q['p90']:.1f}"


def group_lines(report: dict) -> list[str]:
    """One group's table, as Markdown."""
    lines = [f"\n## {report['group']} (XLA_FLAGS={report['flags']!r}, {report['seconds']} s)\n"]
    if "error" in report:
        return lines + [f"failed: {report['error']}"]
    rows = report["rows"]
    if report["group"] in ("host", "torch"):
        header = ["case", "n", "isolated p10/p50/p90 µs", "throughput p50", "chained p50"]
        table = [
            [
                r["case"],
                r["n"],
                _q(r["isolated_us"]),
                f"{r['throughput_us']['p50']:.1f}",
                f"{r['chained_us']['p50']:.1f}" if "chained_us" in r else "",
                f"{r['host_cost_us']:.1f}" if "host_cost_us" in r else "",
            ]
            for r in rows
        ]
        lines += markdown_table([*header, "host cost µs"], table)
    elif report["group"] == "graph":
        header = ["case", "n x chain", "replay p10/p50/p90 µs", "per copy µs", "Python calls"]
        table = [
            [
                r["case"],
                f"{r['n']} x{r['chain']}",
                _q(r["isolated_us"]),
                f"{r['per_copy_us']:.1f}",
                f"{r['python_calls_at_capture']} at capture, "
                f"{r['python_calls_while_timed']} while timed",
            ]
            for r in rows
        ]
        lines += markdown_table(header, table)
    else:
        header = ["group", "case", "coords", "grid", "points", "dtype", "baseline p50 µs"]
        table = [
            [
                r["group"],
                r["case"],
                r["coordinates"],
                r["grid"],
                r["points"] or "",
                r["dtype"],
                f"{'jax' if 'jax_us' in r else 'cupyx'} "
                f"{(r.get('jax_us') or r.get('cupyx_us'))['p50']:.1f}",
                _q(r["xlabind_us"]),
                f"{r['ratio']:.2f}",
                f"{r['xlabind_GBps']:.0f}" if "xlabind_GBps" in r else "",
                f"{r['share_of_peak']:.0%}" if r.get("share_of_peak") else "",
            ]
            for r in rows
        ]
        lines += markdown_table(
            [*header, "xlabind p10/p50/p90 µs", "ratio", "GB/s", "of peak"], table
        )
    if report.get("callback_threads"):
        lines.append(f"\nthe xlabind no-op ran on: {', '.join(report['callback_threads'])}")
    return lines


def target_lines(reports: list[dict]) -> list[str]:
    """The GPU issue's targets (#26), each with what this run measured."""
    by_group = {r["group"]: r for r in reports if "rows" in r}
    lines = ["\n## Targets (issue #26)\n"]
    host = by_group.get("host")
    if host:
        rows = {(r["case"], r["n"]): r for r in host["rows"]}
        for n in SIZES:
            for mine, theirs, target in (
                ("xlabind no-op", "buffer_callback no-op", 1.0),
                ("xlabind CuPy copy", "buffer_callback + CuPy copy", 1.05),
            ):
                if (mine, n) in rows and (theirs, n) in rows:
                    a, b = rows[(mine, n)], rows[(theirs, n)]
                    lines.append(
                        f"- chained per call, {mine} / {theirs}, n={n}: "
                        f"{a['chained_us']['p50'] / b['chained_us']['p50']:.3f} (≤ {target})"
                    )
            if ("xlabind no-op", n) in rows and ("buffer_callback no-op", n) in rows:
                a, b = rows[("xlabind no-op", n)], rows[("buffer_callback no-op", n)]
                lines.append(
                    f"- isolated latency, xlabind no-op / buffer_callback no-op, n={n}: "
                    f"{a['isolated_us']['p50'] / b['isolated_us']['p50']:.3f} (≤ 1.1)"
                )
    graph = by_group.get("graph")
    if graph:
        rows = {r["case"]: r["per_copy_us"] for r in graph["rows"]}
        if {"xlabind CuPy copy", "native copy"} <= set(rows):
            lines.append(
                f"- captured, xlabind CuPy copy / native copy, n=10^8: "
                f"{rows['xlabind CuPy copy'] / rows['native copy']:.3f} (≤ 1.2)"
            )
    for r in by_group.get("kernels", {}).get("rows", []):
        if r.get("points") not in (None, 1 << 24):
            continue
        target = {
            ("order 1", "values"): 1.5 if r["grid"] == 64 else 1.0,
            ("order 1", "grid gradient"): 1.2 if r["grid"] == 64 else 1.0,
            ("order 3", "order 3"): 1.0,
            ("order 3", "spline_filter"): 1.0,
        }.get((r["group"], r["case"]))
        if target is not None:
            lines.append(
                f"- {r['case']} {r['coordinates']} {r['grid']}^3 {r['dtype']}: "
                f"{r['ratio']:.2f} (≥ {target})"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the results here (after every group)")
    parser.add_argument("--quick", action="store_true", help="fewer rounds and sizes")
    parser.add_argument("--group", choices=GROUPS, help="one group, in this process (JSON out)")
    parser.add_argument(
        "--cases",
        nargs="+",
        choices=GROUPS,
        default=list(GROUPS),
        help="the groups to run (in GROUPS' order)",
    )
    args = parser.parse_args(argv)
    if args.group:
        print(json.dumps(worker(args.group, args.quick)))
        return 0
    reports = []
    for group in (g for g in GROUPS if g in args.cases):
        reports.append(run_group(group, args.quick))
        for line in group_lines(reports[-1]):
            print(line, flush=True)
        if args.json:
            write_json(args.json, reports)
    for line in target_lines(reports):
        print(line, flush=True)
    return 1 if any("error" in r for r in reports) else 0


if __name__ == "__main__":
    raise SystemExit(main())
