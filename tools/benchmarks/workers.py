"""The measurements in processes of their own (each needs a fresh jax): the
sharded no-op with and without the status exchange, map_coordinates sharded
over 8 devices, on XLA's pool against threads of its own, and how much the
process grows over a loop of made-and-dropped bound functions."""

from __future__ import annotations

import gc
import importlib

from harness import (
    Case,
    jax,
    jnp,
    measure,
    np,
    os,
    summarize,
    vector,
    warm_up,
    xlabind,
    xlabind_testing,
)
from host_calls import noop_into
from native_ops import map_coordinates_problem

# -- in processes of their own ----------------------------------------------
# 8 devices on this machine's cores (the tests' setting), and as many as it has
# cores (no device waits for a core in a collective).
SHARDED_DEVICES = (8, min(os.cpu_count() or 1, 8))


def sharded_worker(rounds: int, calls: int) -> dict:
    """Medians (µs) of the sharded cases, in this process (on all its devices)."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    devices = len(jax.devices())
    mesh = Mesh(np.array(jax.devices()), ("d",))
    x = jax.device_put(
        vector(devices * 4).reshape(devices, 4), NamedSharding(mesh, PartitionSpec("d"))
    )
    cases = [
        Case("sharded_jnp", "jnp (x + 1)", jax.jit(lambda x: x + 1), x, checks_unwritten=False)
    ]
    for exchange in (True, False):
        xlabind_testing.set_status_exchange(exchange)  # read when lowering: compile now
        tag = "" if exchange else "_unchecked"
        label = "" if exchange else ", without the status exchange"
        for key, rule in (("per_device", "r c -> r c"), ("once", None)):
            op = xlabind.callback(noop_into, lambda x: x, in_place=True, sharding_rule=rule)
            f = jax.jit(op)
            f.lower(x).compile()
            # The no-op leaves its result unwritten: timed with that check off.
            cases.append(
                Case(
                    f"sharded_{key}{tag}",
                    f"no-op callback, {key.replace('_', ' ')}{label}",
                    f,
                    x,
                    checks_unwritten=False,
                )
            )
        warm_up(cases[-2:])
    xlabind_testing.set_status_exchange(True)
    warm_up(cases[:1])
    measure(cases, rounds, calls)
    return {
        "devices": devices,
        "results": {c.key: {"label": c.label, **summarize(c)} for c in cases},
    }


def map_coordinates_sharded_worker(points: int, rounds: int) -> dict:
    """Medians (µs) of map_coordinates on `points` points sharded over this
    process's devices (64³ float64 grid, order 1): values and the grid's
    gradient, split by points (the op's sharding rule) and once per program
    (without it), and the all-reduce of one grid (what the split gradient adds)."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    # The module (xlabind.ops exports the function under the same name).
    module = importlib.import_module("xlabind.ops.map_coordinates.op")
    mesh = Mesh(np.array(jax.devices()), ("d",))
    grid, coords = map_coordinates_problem(64, points, seed=3)
    coords = [jax.device_put(c, NamedSharding(mesh, PartitionSpec("d"))) for c in coords]
    grid = jax.device_put(grid, NamedSharding(mesh, PartitionSpec()))

    def values(g, *c):
        return module.map_coordinates(g, list(c), 1, "nearest")

    def grid_gradient(g, *c):
        return jax.grad(lambda g: jnp.sum(values(g, *c) ** 2))(g)

    cases = []
    for sharded in (True, False):
        module._SHARDED = sharded  # read when tracing: compile now
        tag = "split" if sharded else "once"
        for name, fn in (("values", values), ("grid_gradient", grid_gradient)):
            f = jax.jit(fn)  # traced (reading _SHARDED) by warm_up below
            cases.append(
                Case(
                    f"mc_{name}_{tag}",
                    f"{name.replace('_', ' ')}, "
                    f"{'split by points' if sharded else 'once per program'}",
                    lambda x, f=f: f(x, *coords),
                    grid,
                )
            )
        warm_up(cases[-2:])
    module._SHARDED = True
    reduce = jax.jit(
        jax.shard_map(
            lambda g: jax.lax.psum(g, "d"),
            mesh=mesh,
            in_specs=PartitionSpec(),
            out_specs=PartitionSpec(),
            check_vma=False,
        )
    )
    cases.append(Case("mc_all_reduce", "all-reduce of one grid (64³ float64)", reduce, grid))
    warm_up(cases[-1:])
    np.testing.assert_allclose(cases[0].fn(grid), cases[2].fn(grid), rtol=1e-12)
    np.testing.assert_allclose(cases[1].fn(grid), cases[3].fn(grid), rtol=1e-9, atol=1e-9)
    measure(cases, rounds, 1)
    return {
        "devices": len(jax.devices()),
        "points": points,
        "results": {c.key: {"label": c.label, **summarize(c)} for c in cases},
    }


# Read by the CPU map_coordinates handlers on every call (cpu_point_loops.h):
# set, they start threads of their own instead of using XLA's intra-op pool.
OWN_THREADS_VARIABLE = "XLABIND_MAP_COORDINATES_OWN_THREADS"


def map_coordinates_threads_worker(points: int, rounds: int) -> dict:
    """Medians (µs) of map_coordinates (64³ float64 grid, order 1) with its
    loops on XLA's intra-op pool and on threads of its own: alone; beside a
    matmul XLA runs in the same program; split over this process's devices
    (each device's call on the same pool)."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    module = importlib.import_module("xlabind.ops.map_coordinates.op")
    grid, coords = map_coordinates_problem(64, points, seed=5)
    mesh = Mesh(np.array(jax.devices()), ("d",))
    split = [jax.device_put(c, NamedSharding(mesh, PartitionSpec("d"))) for c in coords]
    matrix = jax.random.normal(jax.random.key(0), (768, 768), jnp.float64)

    def values(g, c):
        return module.map_coordinates(g, list(c), 1, "nearest")

    def grid_gradient(g, c):
        return jax.grad(lambda g: jnp.sum(values(g, c) ** 2))(g)

    # Coordinates and matrix are arguments: as constants XLA would fold the matmul.
    programs = {
        "values": (jax.jit(values), coords),
        "grid_gradient": (jax.jit(grid_gradient), coords),
        # One result: the sum keeps both computations, which XLA may run at once.
        "values_beside_matmul": (
            jax.jit(lambda g, c, m: jnp.sum(values(g, c)) + jnp.sum(m @ m)),
            coords,
            matrix,
        ),
        "grid_gradient_beside_matmul": (
            jax.jit(lambda g, c, m: grid_gradient(g, c) + jnp.sum(m @ m)),
            coords,
            matrix,
        ),
        "values_split": (jax.jit(values), split),
        "grid_gradient_split": (jax.jit(grid_gradient), split),
    }

    def on(own: bool, f, *args):
        def call(g):
            if own:
                os.environ[OWN_THREADS_VARIABLE] = "1"
            else:
                os.environ.pop(OWN_THREADS_VARIABLE, None)
            return f(g, *args)

        return call

    cases = []
    for name, (f, *args) in programs.items():
        for own in (False, True):
            who = "own threads" if own else "XLA's pool"
            cases.append(
                Case(
                    f"mc_{name}_{'own' if own else 'pool'}",
                    f"{name.replace('_', ' ')}, {who}",
                    on(own, f, *args),
                    grid,
                )
            )
    warm_up(cases)
    for pool, own in zip(cases[::2], cases[1::2]):  # the same numbers either way
        np.testing.assert_array_equal(pool.fn(grid), own.fn(grid))
    measure(cases, rounds, 1)
    os.environ.pop(OWN_THREADS_VARIABLE, None)
    return {
        "devices": len(jax.devices()),
        "points": points,
        "results": {c.key: {"label": c.label, **summarize(c)} for c in cases},
    }


def print_map_coordinates_threads(report: dict) -> None:
    results = report["results"]
    print(
        f"\nmap_coordinates on {report['points']:,} points, 64³ float64 grid, {os.cpu_count()} "
        f"cores: XLA's intra-op pool against threads of its own (median µs; split: over "
        f"{report['devices']} CPU devices):"
    )
    for row in results.values():
        print(f"  {row['label']:<58} {row['median_us']:>10.1f}")
    names = dict.fromkeys(key[3:].rsplit("_", 1)[0] for key in results)
    for name in names:
        ratio = results[f"mc_{name}_own"]["median_us"] / results[f"mc_{name}_pool"]["median_us"]
        print(f"  {name.replace('_', ' ')}: own threads / XLA's pool = {ratio:.2f}x")


def print_map_coordinates_sharded(report: dict) -> None:
    results = report["results"]
    print(
        f"\nmap_coordinates on {report['points']:,} points sharded over {report['devices']} "
        f"CPU devices, {os.cpu_count()} cores, 64³ float64 grid (median µs):"
    )
    for row in results.values():
        print(f"  {row['label']:<58} {row['median_us']:>10.1f}")
    for name in ("values", "grid_gradient"):
        ratio = results[f"mc_{name}_once"]["median_us"] / results[f"mc_{name}_split"]["median_us"]
        print(f"  {name.replace('_', ' ')}: once per program / split = {ratio:.2f}x")
    share = results["mc_all_reduce"]["median_us"] / results["mc_grid_gradient_split"]["median_us"]
    print(f"  the reduction (one grid's all-reduce) is {100 * share:.1f}% of the split gradient")


def lifetime_worker(kind: str, loops: int) -> dict:
    """RSS growth (MiB) over `loops` bound functions made, jitted, called and
    dropped, each closing over 1 MiB, in this process."""
    x = jnp.ones(4)

    def rss_mib() -> float:
        gc.collect()
        xlabind_testing.collect_released_callbacks()
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def one(i):
        payload = np.full(1 << 17, float(i))  # 1 MiB the function keeps

        def fn(a):
            return np.asarray(a) + payload[0]

        if kind == "xlabind":
            op = xlabind.callback(fn, lambda a: a)
            return jax.jit(lambda a: op(a) + 1)(x)
        return jax.jit(
            lambda a: jax.pure_callback(fn, jax.ShapeDtypeStruct(a.shape, a.dtype), a) + 1
        )(x)

    for i in range(20):  # jax's own caches and allocator warmed up first
        one(i).block_until_ready()
    before = rss_mib()
    for i in range(loops):
        np.testing.assert_allclose(np.asarray(one(i)), i + 2.0)
    after = rss_mib()
    return {
        "kind": kind,
        "loops": loops,
        "growth_mib": after - before,
        "rss_mib": after,
        "live_callbacks": xlabind_testing.live_callback_data_count(),
    }


def print_sharded(report: dict) -> None:
    results = report["results"]
    print(f"\nOn {report['devices']} CPU devices, {os.cpu_count()} cores (median µs):")
    for row in results.values():
        print(f"  {row['label']:<58} {row['median_us']:>8.1f}")
    for key in ("per_device", "once"):
        ratio = (
            results[f"sharded_{key}"]["median_us"]
            / results[f"sharded_{key}_unchecked"]["median_us"]
        )
        print(f"  status exchange, {key.replace('_', ' ')}: {ratio:.3f}x the call without it")


def print_lifetime(rows: list[dict]) -> None:
    print(
        "\nProcess growth over a loop of bound functions (1 MiB closures) made, jitted, "
        "called, dropped:"
    )
    for row in rows:
        print(
            f"  {row['kind']:<14} {row['loops']:>5} loops: {row['growth_mib']:+8.1f} MiB "
            f"(RSS {row['rss_mib']:.0f} MiB)"
        )
