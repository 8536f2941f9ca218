"""Callbacks on XLA's own threads (``--worker-threads``): what one call costs
where real programs make it. XLA's CPU client runs a one-device program on the
caller's thread (inline) only while its cost analysis counts under 1,000
flops; a larger one, and each device's part of a program over several
devices, runs on one of XLA's threads, none of which Python started.

Each row: K in-place no-op calls chained on every device, against the same
program with a native no-op FFI target in their place; the difference over
(devices × K) calls. The one-device program runs twice: as it is (inline),
and on an array of 2^20 elements multiplied first (the same in both
programs), which sends it to XLA's threads: over 1,000 flops is enough for
xlabind's calls, while a program with ``buffer_callback`` stays inline up to
some 2^16 elements (jax 0.10.2). Each callback kind is measured in a process of its own:
a thread state one kind leaves on XLA's threads would make another's calls
there cheaper.

    tools/bazel run //tools:benchmark -- --worker-threads
"""

from __future__ import annotations

import statistics
import threading
import time

from harness import jax, jnp, np, on_cpu_devices, run_worker, xlabind, xlabind_testing
from host_calls import noop_into

try:
    from jax.experimental.buffer_callback import buffer_callback
except ImportError:  # older jax: its rows are reported as missing
    buffer_callback = None

CHAIN = 64
#: (devices, whether the program does enough work for XLA to run it on its
#: threads even on one device).
ROWS = ((1, False), (1, True), (2, False), (8, False))
#: Elements per device: 8 leave a one-device program inline, BUSY_ELEMENTS
#: multiplied send it to XLA's threads (the calls are in place: no copies).
ELEMENTS, BUSY_ELEMENTS = 8, 1 << 20
# xlabind_unchecked: bound with stop_all_devices=False, so without the small
# all-reduce with which each call over several devices tells the others
# whether it failed (xlabind/_lowering/status_exchange.py); buffer_callback
# has none.
KINDS = ("xlabind", "xlabind_unchecked", "buffer_callback")


def _like(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def _call(kind: str, record=None):
    """One in-place no-op call of `kind` (the native baseline: "native"); it
    calls `record()` when given."""
    if kind.startswith("xlabind"):

        def noop(x, *, out):
            record()

        return xlabind.callback(
            noop if record else noop_into,
            lambda x: x,
            in_place=True,
            input_output_aliases={0: 0},
            stop_all_devices=kind != "xlabind_unchecked",
        )
    if kind == "buffer_callback":

        def function(ctx, out, a):
            if record:
                record()

        return lambda x: buffer_callback(function, _like(x), input_output_aliases={0: 0})(x)
    return lambda x: jax.ffi.ffi_call(
        xlabind_testing.NOOP_TARGET, _like(x), input_output_aliases={0: 0}
    )(x)


def worker_threads_worker(kind: str, rounds: int, busy: bool = False) -> dict:
    """µs per call of `kind` chained on each of this process's devices, over
    the native chain; and on which threads the calls ran (the first call of
    each chain records it: a call of the same kind, so that no other kind
    leaves thread states behind). `busy`: the chain follows a multiply of
    BUSY_ELEMENTS per device, in both programs."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    if kind == "buffer_callback" and buffer_callback is None:
        return {"kind": kind, "missing": f"jax {jax.__version__} has no buffer_callback"}
    mesh = Mesh(np.array(jax.devices()), ("d",))
    on_main = set()

    def program(first, call):
        def body(x):
            if busy:
                x = x * np.float32(1.5)
            x = first(x)
            for _ in range(CHAIN):
                x = call(x)
            return x

        return jax.jit(
            jax.shard_map(
                body, mesh=mesh, in_specs=PartitionSpec("d"), out_specs=PartitionSpec("d")
            )
        )

    record = lambda: on_main.add(threading.current_thread() is threading.main_thread())
    native = _call("native")
    programs = {"native": program(native, native), kind: program(_call(kind, record), _call(kind))}
    x = jax.device_put(
        jnp.zeros((BUSY_ELEMENTS if busy else ELEMENTS) * len(mesh.devices), jnp.float32),
        NamedSharding(mesh, PartitionSpec("d")),
    )
    samples = {name: [] for name in programs}
    for round_ in range(rounds + 1):  # the first round warms up
        for name, f in programs.items():
            start = time.perf_counter()
            jax.block_until_ready(f(x))
            if round_:
                samples[name].append(time.perf_counter() - start)
    base, total = statistics.median(samples["native"]), statistics.median(samples[kind])
    devices = len(mesh.devices)
    return {
        "kind": kind,
        "devices": devices,
        "busy": busy,
        "us_per_call": (total - base) / (devices * (CHAIN + 1)) * 1e6,
        "program_ms": total * 1e3,
        "native_program_ms": base * 1e3,
        "threads": (
            "the caller's" if on_main == {True} else "XLA's" if on_main == {False} else "both"
        ),
    }


def worker_arguments(kind: str, busy: bool, rounds: int) -> list[str]:
    """main.py's arguments for one kind's row in a worker process."""
    return [
        "--worker",
        "worker_threads",
        kind,
        *(["busy"] if busy else []),
        "--rounds",
        str(rounds),
    ]


def measure_worker_threads(rounds: int) -> list[dict]:
    """Every kind on every row, each in a fresh process."""
    return [
        run_worker(worker_arguments(kind, busy, rounds), on_cpu_devices(n))
        for n, busy in ROWS
        for kind in KINDS
    ]


def print_worker_threads(rows: list[dict]) -> None:
    print(
        f"\nIn-place no-op callbacks, {CHAIN} chained on each device, over native no-ops "
        "(µs per call; each kind in a process of its own):"
    )
    print(
        f"{'devices':>8} {'work':>6} {'threads':>14} "
        + " ".join(f"{k:>18}" for k in KINDS)
        + f" {'xlabind/bcb':>12} {'unchecked/bcb':>14}"
    )
    for n, busy in ROWS:
        by_kind = {
            r["kind"]: r for r in rows if (r.get("devices"), r.get("busy", False)) == (n, busy)
        }
        cells = [
            f"{by_kind[k]['us_per_call']:18.2f}"
            if "us_per_call" in by_kind.get(k, {})
            else f"{'-':>18}"
            for k in KINDS
        ]
        ratios = f"{'-':>12} {'-':>14}"
        if all("us_per_call" in by_kind.get(k, {}) for k in KINDS):
            checked, unchecked, theirs = (by_kind[k]["us_per_call"] for k in KINDS)
            ratios = f"{checked / theirs:12.2f} {unchecked / theirs:14.2f}"
        threads = "/".join(sorted({r.get("threads", "?") for r in by_kind.values()}))
        work = "busy" if busy else "small"
        print(f"{n:>8} {work:>6} {threads:>14} " + " ".join(cells) + " " + ratios)
    for r in rows:
        if "missing" in r:
            print(f"  ({r['missing']})")
