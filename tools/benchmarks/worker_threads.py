"""Callbacks on XLA's own threads (``--worker-threads``): what one call costs
where real programs make it. A program over several CPU devices runs each
device's part on one of XLA's threads, none of which Python started; a
one-device program this small runs on the caller's thread (inline).

Each row: K in-place no-op calls chained on every device, against the same
program with a native no-op FFI target in their place; the difference over
(devices × K) calls. Each callback kind is measured in a process of its own:
a thread state one kind leaves on XLA's threads would make another's calls
there cheaper.

    tools/bazel run //tools:benchmark -- --worker-threads
"""

from __future__ import annotations

import statistics
import threading
import time

from harness import jax, jnp, np, os, run_worker, xlabind, xlabind_testing
from host_calls import noop_into

try:
    from jax.experimental.buffer_callback import buffer_callback
except ImportError:  # older jax: its rows are reported as missing
    buffer_callback = None

CHAIN = 64
DEVICES = (1, 2, 8)
# xlabind_unchecked: without the status exchange, the small all-reduce with
# which each call over several devices tells the others whether it failed
# (xlabind/_lowering/status_exchange.py); buffer_callback has none.
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
            noop if record else noop_into, lambda x: x, in_place=True, input_output_aliases={0: 0}
        )
    if kind == "buffer_callback":

        def function(ctx, out, a):
            if record:
                record()

        return lambda x: buffer_callback(function, _like(x), input_output_aliases={0: 0})(x)
    return lambda x: jax.ffi.ffi_call(
        xlabind_testing.NOOP_TARGET, _like(x), input_output_aliases={0: 0}
    )(x)


def worker_threads_worker(kind: str, rounds: int) -> dict:
    """µs per call of `kind` chained on each of this process's devices, over
    the native chain; and on which threads the calls ran (the first call of
    each chain records it: a call of the same kind, so that no other kind
    leaves thread states behind)."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    if kind == "buffer_callback" and buffer_callback is None:
        return {"kind": kind, "missing": f"jax {jax.__version__} has no buffer_callback"}
    xlabind_testing.set_status_exchange(kind != "xlabind_unchecked")  # read when lowering
    mesh = Mesh(np.array(jax.devices()), ("d",))
    on_main = set()

    def program(first, call):
        def body(x):
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
        jnp.zeros(8 * len(mesh.devices), jnp.float32), NamedSharding(mesh, PartitionSpec("d"))
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
        "us_per_call": (total - base) / (devices * (CHAIN + 1)) * 1e6,
        "program_ms": total * 1e3,
        "native_program_ms": base * 1e3,
        "threads": (
            "the caller's" if on_main == {True} else "XLA's" if on_main == {False} else "both"
        ),
    }


def measure_worker_threads(rounds: int) -> list[dict]:
    """Every kind on every device count, each in a fresh process."""
    flags = os.environ.get("XLA_FLAGS", "")
    return [
        run_worker(
            ["--worker", "worker_threads", kind, "--rounds", str(rounds)],
            {"XLA_FLAGS": f"{flags} --xla_force_host_platform_device_count={n}"},
        )
        for n in DEVICES
        for kind in KINDS
    ]


def print_worker_threads(rows: list[dict]) -> None:
    print(
        f"\nIn-place no-op callbacks, {CHAIN} chained on each device, over native no-ops "
        "(µs per call; each kind in a process of its own):"
    )
    print(
        f"{'devices':>8} {'threads':>14} "
        + " ".join(f"{k:>18}" for k in KINDS)
        + f" {'unchecked/bcb':>14}"
    )
    for n in DEVICES:
        by_kind = {r["kind"]: r for r in rows if r.get("devices") == n}
        cells = [
            f"{by_kind[k]['us_per_call']:18.2f}"
            if "us_per_call" in by_kind.get(k, {})
            else f"{'-':>18}"
            for k in KINDS
        ]
        ratio = f"{'-':>14}"
        if "us_per_call" in by_kind.get("buffer_callback", {}):
            ours, theirs = (by_kind[k]["us_per_call"] for k in KINDS[1:])
            ratio = f"{ours / theirs:14.2f}"
        threads = "/".join(sorted({r.get("threads", "?") for r in by_kind.values()}))
        print(f"{n:>8} {threads:>14} " + " ".join(cells) + " " + ratio)
    for r in rows:
        if "missing" in r:
            print(f"  ({r['missing']})")
