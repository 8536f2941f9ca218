"""The native ops against the machine's limits (``--roofline``).

For map_coordinates (orders 0-5; values, the gradient in the grid and the
gradient in the coordinates) and spline_filter (orders 2-5; values and the
transpose), in float32 and float64, on a 64^3 grid (cache-resident) and a
256^3 one (not), with 2^20 points: the op's time next to jax's, SciPy's or a
jnp gather's where they compute the same, and next to three lower bounds,
each measured in this run by tools/benchmarks/machine_probe.cc (built with
the ops' toolchain, on as many threads as the ops get):

  stream  the arrays every call must read and write once (the coordinates,
          the values or cotangents; the grid's fill for a transpose), timed
          as a pass of exactly those streams;
  nodes   the (order + 1)^3 grid nodes of each point, read (or, for the grid
          gradient, read and written back) as whole vectors in random order,
          with nothing computed: the accesses alone;
  fma     the multiply-adds of the nested sums and of the weights'
          polynomials (counted below), at the rate of independent 256-bit
          FMA chains.

The bound is the largest of the three (none of them can overlap to less),
and "% of bound" is the bound's time over the op's: 100% is the machine's
limit for that way of doing the work. The coordinate gradient's bound reads
the nodes once, although xlabind runs one gather per axis: the gap is what a
fused kernel could gain.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time

from harness import Case, Ready, jax, jnp, measure, np, summarize, warm_up
from native_ops import _cubic_by_gathers

POINTS = 1 << 20
SIDES = (64, 256)
DTYPES = ("float32", "float64")
MODE = "mirror"
KINDS = ("values", "grid gradient", "coordinate gradient")
FILTER_KINDS = ("values", "transpose")


def _probe_path() -> str:
    """//tools:machine_probe in the benchmark's runfiles, or where
    XLABIND_MACHINE_PROBE says (the benchmark run outside Bazel)."""
    if os.environ.get("XLABIND_MACHINE_PROBE"):
        return os.environ["XLABIND_MACHINE_PROBE"]
    # main.py's path as `bazel run` gave it, in the runfiles (Python's own
    # sys.path[0] and __file__ resolve the links to the source tree).
    main = os.path.abspath(sys.argv[0])
    return os.path.join(os.path.dirname(os.path.dirname(main)), "machine_probe")


@dataclasses.dataclass(frozen=True)
class Workload:
    op: str  # "map_coordinates" or "spline_filter"
    kind: str  # one of KINDS or FILTER_KINDS
    order: int
    side: int
    dtype: str
    points: int = POINTS

    @property
    def key(self) -> str:
        return f"{self.op}_{self.kind.replace(' ', '_')}_{self.order}_{self.side}_{self.dtype}"

    @property
    def grid_elements(self) -> int:
        return self.side**3

    def streams(self) -> list[tuple[int, int, int]]:
        """(arrays read, arrays written, elements) of each pass every call needs."""
        if self.op == "spline_filter":
            return [(1, 1, self.grid_elements)]
        if self.kind == "values":
            return [(3, 1, self.points)]
        if self.kind == "grid gradient":  # coordinates and cotangents in; the grid zeroed
            return [(4, 0, self.points), (0, 1, self.grid_elements)]
        return [(4, 3, self.points)]  # coordinates and cotangents in, 3 cotangents out

    def visits(self) -> tuple[str, int] | None:
        """How the grid's nodes are touched: ("gather" or "scatter", nodes per axis)."""
        if self.op == "spline_filter":
            return None
        return ("scatter" if self.kind == "grid gradient" else "gather", self.order + 1)

    def flops(self) -> float:
        """Floating-point operations per call (an FMA is two): for each point,
        the nested sum over (order + 1)^3 nodes, n^3 + n^2 + n multiply-adds,
        and each axis' n weights, a polynomial of degree `order` each (order
        0 rounds and reads: nothing); the coordinate gradient sums once per
        axis. A prefilter pass is, per element and axis, a gain and, per pole,
        a causal and an anticausal multiply-add."""
        if self.op == "spline_filter":
            poles = 1 if self.order <= 3 else 2
            return 2.0 * self.grid_elements * 3 * (2 * poles + 1)
        if self.order == 0:
            return 0.0
        n = self.order + 1
        per_point = 2 * (n**3 + n**2 + n + 3 * n * self.order)
        return float(per_point * self.points * (3 if self.kind == "coordinate gradient" else 1))


def workloads(quick: bool = False) -> list[Workload]:
    """Every workload of the table; `quick`: the 64^3 float64 ones only."""
    out = []
    for side in SIDES[:1] if quick else SIDES:
        for dtype in DTYPES[1:] if quick else DTYPES:
            for order in range(6):
                for kind in KINDS:
                    if kind == "coordinate gradient" and order == 0:
                        continue  # piecewise constant: its gradient is zero
                    out.append(Workload("map_coordinates", kind, order, side, dtype))
            for order in range(2, 6):
                for kind in FILTER_KINDS:
                    out.append(Workload("spline_filter", kind, order, side, dtype))
    return out


class Machine:
    """The probe's ceilings on this machine, each measured once per run."""

    def __init__(self, threads: int):
        self.threads = threads

    def _probe(self, *args) -> dict:
        out = subprocess.run(
            [_probe_path(), *map(str, args), str(self.threads)],
            check=True,
            capture_output=True,
            text=True,
        )
        return json.loads(out.stdout)

    @staticmethod
    def _short(dtype: str) -> str:
        return "f32" if dtype == "float32" else "f64"

    def stream_seconds(self, dtype: str, reads: int, writes: int, elements: int) -> float:
        return self._probe("stream", self._short(dtype), reads, writes, elements)["seconds"]

    def stream_bandwidth(self, dtype: str, reads: int, writes: int, elements: int) -> float:
        report = self._probe("stream", self._short(dtype), reads, writes, elements)
        return report["bytes"] / report["seconds"]

    def fma_rate(self, dtype: str) -> float:
        report = self._probe("fma", self._short(dtype))
        return report["flops"] / report["seconds"]

    def node_seconds(self, mode: str, dtype: str, side: int, nodes: int, points: int) -> float:
        return self._probe("nodes", mode, self._short(dtype), side, nodes, points)["seconds"]

    def bounds(self, w: Workload) -> dict[str, float]:
        """Seconds per call each ceiling allows, and the largest ("bound")."""
        out = {
            "stream": sum(self.stream_seconds(w.dtype, *s) for s in w.streams()),
            "fma": w.flops() / self.fma_rate(w.dtype),
        }
        visits = w.visits()
        if visits is not None:
            out["nodes"] = self.node_seconds(visits[0], w.dtype, w.side, visits[1], w.points)
        binding = max(out, key=out.get)
        return {**out, "bound": out[binding], "binding": binding}


def _problem(w: Workload):
    rng = np.random.default_rng(w.side + w.order)
    grid = jnp.asarray(rng.standard_normal((w.side,) * 3), w.dtype)
    # Three arrays, not one (3, points): slicing one inside the jitted call
    # would add three copies to every case.
    coords = tuple(jnp.asarray(rng.uniform(0.0, w.side - 1.0, w.points), w.dtype) for _ in range(3))
    return grid, coords


def _ours(w: Workload):
    """xlabind's call of workload w: a jitted function of (grid, coordinates)."""
    from xlabind.ops import map_coordinates, spline_filter

    if w.op == "spline_filter":
        if w.kind == "values":
            return jax.jit(lambda g, c: spline_filter(g, w.order, MODE))
        # The transpose, through the linear map's vjp (the cotangent is the grid).
        return jax.jit(lambda g, c: jax.vjp(lambda x: spline_filter(x, w.order, MODE), g)[1](g)[0])

    def f(g, c):
        return map_coordinates(g, list(c), w.order, MODE, prefilter=False)

    return _differentiated(f, w.kind)


def _differentiated(f, kind: str):
    if kind == "values":
        return jax.jit(f)
    if kind == "grid gradient":
        return jax.jit(jax.grad(lambda g, c: f(g, c).sum()))
    return jax.jit(jax.grad(lambda g, c: f(g, c).sum(), argnums=1))


def _baselines(w: Workload, grid, coords) -> dict[str, object]:
    """The others' calls of the same work, by name: jitted functions of
    (grid, coordinates), or host functions for SciPy."""
    out = {}
    if w.op == "spline_filter":
        if w.kind == "values":
            import scipy.ndimage

            host = np.asarray(grid)
            out["SciPy"] = lambda g, c: scipy.ndimage.spline_filter(
                host, w.order, mode=MODE, output=host.dtype
            )
        return out
    if w.order <= 1:
        from jax.scipy.ndimage import map_coordinates as jax_map

        out["jax"] = _differentiated(lambda g, c: jax_map(g, list(c), w.order, MODE), w.kind)
    if w.order == 3:
        out["jnp gather"] = _differentiated(lambda g, c: _cubic_by_gathers(g, list(c)), w.kind)
    if w.order >= 2 and w.kind == "values":
        import scipy.ndimage

        host_grid, host_coords = np.asarray(grid), np.stack([np.asarray(c) for c in coords])
        out["SciPy"] = lambda g, c: scipy.ndimage.map_coordinates(
            host_grid, host_coords, order=w.order, mode=MODE, prefilter=False
        )
    return out


class _Tree(Ready):
    """A call's result, arrays or a tuple of them (a coordinate gradient)."""

    def block_until_ready(self):
        return jax.block_until_ready(self.value)


def _case(key: str, label: str, f, grid, coords, expected=None) -> Case:
    def call(x, f=f):
        result = f(grid, coords)
        return Ready(result) if isinstance(result, np.ndarray) else _Tree(result)

    return Case(key, label, call, grid, expected)


def _rounds(cases: list[Case], most: int) -> int:
    """Rounds for about two seconds a workload (at least 3, at most `most`):
    the fast cases get more samples, SciPy's second-long calls fewer."""
    start = time.perf_counter()
    for case in cases:
        case.fn(case.x).block_until_ready()
    per_round = 2 * (time.perf_counter() - start)  # each timed call follows an untimed one
    return max(3, min(most, int(2.0 / max(per_round, 1e-6))))


def _shard(grid, coords):
    """The grid on every device, the points split across them (the op's rule)."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(jax.devices()), ("d",))
    return (
        jax.device_put(grid, NamedSharding(mesh, PartitionSpec())),
        tuple(jax.device_put(c, NamedSharding(mesh, PartitionSpec("d"))) for c in coords),
    )


def measure_workloads(rounds: int, with_baselines: bool, quick: bool = False) -> dict[str, dict]:
    """Median µs of xlabind's call of every workload (and of its baselines),
    on this process's devices: each workload's cases interleaved, each timed
    call after an untimed one of its own (see main.py's docstring). With the
    baselines, the workload's bounds too ("bounds", in seconds), probed right
    after its cases: these machines' speed drifts over a run (a probe's time
    moved 2x between two runs a minute apart), so each bound is measured
    beside what it bounds."""
    results = {}
    devices = len(jax.devices())
    machine = Machine(os.cpu_count() or 1)
    for w in workloads(quick):
        grid, coords = _problem(w)
        if devices > 1:
            grid, coords = _shard(grid, coords)
        ours = _ours(w)
        cases = [_case(w.key, "xlabind", ours, grid, coords)]
        if with_baselines:
            expected = None
            if w.dtype == "float64" and w.kind == "values":
                expected = np.asarray(ours(grid, coords))
            for name, f in _baselines(w, grid, coords).items():
                cases.append(
                    _case(
                        f"{w.key}:{name}",
                        name,
                        f,
                        grid,
                        coords,
                        None if name == "jnp gather" else expected,
                    )
                )
        warm_up(cases)
        measure(cases, _rounds(cases, rounds), 1, after_itself=True)
        results[w.key] = {c.label: summarize(c)["median_us"] for c in cases}
        del cases, ours, grid, coords
        if with_baselines:
            results[w.key]["bounds"] = machine.bounds(w)
    return results


def roofline_worker(rounds: int, quick: bool) -> dict:
    """The xlabind column on this process's devices (the 8-device run)."""
    return {"devices": len(jax.devices()), "results": measure_workloads(rounds, False, quick)}


def report(results: dict[str, dict], sharded: dict | None, threads: int) -> dict:
    """Prints the roofline table; returns it, with the machine's ceilings."""
    machine = Machine(threads)
    probe = {
        dtype: {
            "stream GB/s (3 reads, 1 write, 2^20)": machine.stream_bandwidth(dtype, 3, 1, POINTS)
            / 1e9,
            "stream GB/s (fill of 256^3)": machine.stream_bandwidth(dtype, 0, 1, 256**3) / 1e9,
            "FMA GFLOP/s": machine.fma_rate(dtype) / 1e9,
        }
        for dtype in DTYPES
    }
    print(
        f"\nroofline: {POINTS:,} points, mode {MODE!r}, {threads} threads "
        f"(machine_probe: fastest of 7 passes)"
    )
    for dtype, ceilings in probe.items():
        print(f"  {dtype}: " + ", ".join(f"{k} {v:.1f}" for k, v in ceilings.items()))
    multi = sharded["devices"] if sharded else None
    header = (
        f"{'op':<16} {'kind':<20} {'k':>1} {'dtype':<7} {'grid':>4}  {'xlabind':>8}  "
        f"{'baseline':<18} {'ratio':>6}  {'stream':>7} {'nodes':>7} {'fma':>7}  "
        f"{'bound':<6} {'of bound':>8}"
    )
    if multi:
        header += f"  {f'{multi} dev':>8} {'of bound':>8}"
    print(header + "\n" + "-" * len(header) + "\n(times in ms; ratio: baseline / xlabind)")
    rows = []
    for w in workloads():
        if w.key not in results:
            continue
        times = dict(results[w.key])
        bounds = times.pop("bounds")
        ours = times["xlabind"] / 1e3
        others = [(name, us / 1e3) for name, us in times.items() if name != "xlabind"]
        if not others:
            others = [("", None)]
        for index, (name, theirs) in enumerate(others):
            line = (
                f"{w.op:<16} {w.kind:<20} {w.order:>1} {w.dtype:<7} {w.side:>4}  "
                if index == 0
                else " " * 55
            )
            line = line[:55] + (f"{ours:>8.2f}  " if index == 0 else " " * 10)
            if theirs is None:
                line += " " * 26
            else:
                line += f"{name + f' {theirs:.2f}':<18} {theirs / ours:>6.2f}  "
            if index == 0:
                nodes = bounds.get("nodes")
                line += (
                    f"{bounds['stream'] * 1e3:>7.2f} "
                    f"{'' if nodes is None else f'{nodes * 1e3:.2f}':>7} "
                    f"{bounds['fma'] * 1e3:>7.2f}  {bounds['binding']:<6} "
                    f"{100 * bounds['bound'] * 1e3 / ours:>7.0f}%"
                )
                if multi and w.key in sharded["results"]:
                    split = sharded["results"][w.key]["xlabind"] / 1e3
                    line += f"  {split:>8.2f} {100 * bounds['bound'] * 1e3 / split:>7.0f}%"
            print(line.rstrip())
        rows.append(
            {
                "workload": dataclasses.asdict(w),
                "ms": {k: v / 1e3 for k, v in times.items()},
                "bounds_ms": {
                    k: (v * 1e3 if isinstance(v, float) else v) for k, v in bounds.items()
                },
                "fraction_of_bound": bounds["bound"] * 1e3 / ours,
                "sharded_ms": (
                    sharded["results"][w.key]["xlabind"] / 1e3
                    if multi and w.key in sharded["results"]
                    else None
                ),
            }
        )
    return {"ceilings": probe, "threads": threads, "rows": rows, "devices_sharded": multi}
