"""How much a call through xlabind costs, next to the alternatives, in one run.

    tools/bazel run //tools:benchmark -- --json /tmp/bench.json
    tools/bazel run //tools:benchmark -- --quick      # a few seconds, for smoke tests
    tools/bazel run //tools:benchmark -- --grid-sweep # map_coordinates on 32^3 to 96^3 grids

The CPU rows: every case a jitted function of one float64 array, timed on the
CPU by the harness (harness.py); the measurements that need a fresh jax in
processes of their own (workers.py, worker_threads.py); --roofline,
--cuda-host, --worker-threads, --spline-orders and --grid-sweep alone.
docs/development/measuring.md says what each case and option times and how;
the ratios in the summary are what the issues set targets for, and nothing
here asserts on them, since timings depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from cuda_host import cuda_host_main
from harness import (
    CALLS_PER_ROUND,
    DEFAULT_ROUNDS,
    QUICK_ROUNDS,
    Case,
    WorkerFailed,
    environment,
    jax,
    measure,
    on_cpu_devices,
    pin_malloc,
    run_worker,
    summarize,
    warm_up,
    write_json,
)
from host_calls import BATCH, LARGE, SMALL, all_cases
from native_ops import (
    map_coordinates_groups,
    map_coordinates_sweep,
    print_spline_orders,
    print_sweep,
    spline_groups,
    spline_orders_groups,
)
from roofline import measure_workloads, roofline_worker
from roofline import report as print_roofline
from worker_threads import measure_worker_threads, print_worker_threads, worker_threads_worker
from workers import (
    SHARDED_DEVICES,
    lifetime_worker,
    map_coordinates_sharded_worker,
    map_coordinates_threads_worker,
    print_lifetime,
    print_map_coordinates_sharded,
    print_map_coordinates_threads,
    print_sharded,
    sharded_worker,
)

# -- reporting ---------------------------------------------------------------
TARGETS = [
    # (name, numerator key, denominator key, target maximum or None)
    ("xlabind no-op / native no-op", f"xlabind_in_place_{SMALL}", f"native_noop_{SMALL}", 1.10),
    ("jaxbind drop-in / native no-op", f"jaxbind_{SMALL}", f"native_noop_{SMALL}", 1.15),
    (
        "jaxbind drop-in / in place, the same write",
        f"jaxbind_{SMALL}",
        f"xlabind_in_place_copy_{SMALL}",
        None,
    ),
    ("AD-wrapped / plain", f"xlabind_linear_{SMALL}", f"xlabind_in_place_{SMALL}", 1.05),
    (
        "in place, one write: checked / unchecked",
        f"xlabind_in_place_copy_{SMALL}",
        f"xlabind_in_place_copy_unchecked_{SMALL}",
        None,
    ),
    (
        "in place, one write / native copy",
        f"xlabind_in_place_copy_{SMALL}",
        f"native_copy_{SMALL}",
        None,
    ),
    (
        "in place, one write / native copy + the same NumPy write",
        f"xlabind_in_place_copy_{SMALL}",
        f"native_copy_and_write_{SMALL}",
        1.10,
    ),
    (
        "in place, one write / native copy, n = 10^6",
        f"xlabind_in_place_copy_{LARGE}",
        f"native_copy_{LARGE}",
        None,
    ),
    (f"native vmap / sequential vmap (batch {BATCH})", "vmap_native", "vmap_sequential", None),
    (
        "eager map_coordinates, xlabind / jax",
        "eager_map_coordinates_xlabind",
        "eager_map_coordinates_jax",
        None,
    ),
]
SPEEDUPS = [
    # (name, jax's key, xlabind's key, target minimum): how many times faster xlabind is
    (
        "map_coordinates forward, jax / xlabind",
        "map_coordinates_jax",
        "map_coordinates_xlabind",
        1.5,
    ),
    (
        "map_coordinates grad in input, jax / xlabind",
        "map_coordinates_grad_jax",
        "map_coordinates_grad_xlabind",
        5.0,
    ),
    ("order-3 forward, SciPy / xlabind", "spline_scipy", "spline_xlabind", 2.0),
    ("order-3 forward, jnp gathers / xlabind", "spline_jnp", "spline_xlabind", 4.0),
    (
        "order-3 grad in input, jnp gathers / xlabind",
        "spline_grad_jnp",
        "spline_grad_xlabind",
        10.0,
    ),
]


def ratios(results: dict[str, dict]) -> list[dict]:
    out = []
    for rows, bound in ((TARGETS, "target_max"), (SPEEDUPS, "target_min")):
        for name, num, den, target in rows:
            if num in results and den in results:
                row = {"name": name, "numerator": num, "denominator": den}
                row["ratio"] = results[num]["median_us"] / results[den]["median_us"]
                out.append({**row, "target_max": None, "target_min": None, bound: target})
    return out


def print_report(
    cases: list[Case],
    results: dict[str, dict],
    ratio_rows: list[dict],
    notes: list[str],
    elapsed: float,
) -> None:
    unit = results[f"native_noop_{SMALL}"]["median_us"]
    width = max(len(c.label) for c in cases)
    print(f"{'case':<{width}}  {'n':>8}  {'median µs':>10}  {'vs native':>9}")
    print("-" * (width + 33))
    for case in cases:
        median = results[case.key]["median_us"]
        print(
            f"{case.label:<{width}}  {case.size_label:>8}  {median:>10.1f}  {median / unit:>9.2f}"
        )
    print()
    for row in ratio_rows:
        target = ""
        if row["target_max"] is not None:
            target = f" (target ≤ {row['target_max']:.2f})"
        elif row["target_min"] is not None:
            target = f" (target ≥ {row['target_min']:.2f})"
        print(f"{row['name'] + target + ':':<60} {row['ratio']:.3f}")
    for note in notes:
        print(f"note: {note}")
    calls = len(cases[0].times)
    slow = [c for c in cases if c.key.startswith(("map_coordinates", "spline"))]
    slow_calls = f", {len(slow[0].times)} per native-op case" if slow else ""
    print(
        f"\n{calls} timed calls per case{slow_calls}, {elapsed:.1f} s; jax {jax.__version__}, "
        f"{os.cpu_count()} CPUs"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help=f"rounds of interleaved calls (default {DEFAULT_ROUNDS}, {QUICK_ROUNDS} with --quick)",
    )
    parser.add_argument(
        "--calls-per-round",
        type=int,
        default=CALLS_PER_ROUND,
        help=f"timed calls of each case per round (default {CALLS_PER_ROUND})",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a few rounds only: a smoke test, not a measurement"
    )
    parser.add_argument("--json", metavar="PATH", help="also write every result to PATH as JSON")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument(
        "--grid-sweep",
        action="store_true",
        help="only map_coordinates' values against jax's, on grids from 32^3 "
        "to 96^3 (where the grid outgrows a core's L2)",
    )
    parser.add_argument(
        "--roofline",
        action="store_true",
        help="only the native ops against the machine's measured limits "
        "(orders 0-5, float32 and float64, 64^3 and 256^3, values and "
        "gradients; 1 and 8 devices)",
    )
    parser.add_argument(
        "--cuda-host",
        action="store_true",
        help="only the host work of CUDA callbacks, on the CPU with stand-ins "
        "for the GPU, CuPy and PyTorch (cuda_host.py)",
    )
    parser.add_argument(
        "--worker-threads",
        action="store_true",
        help="only the cost of a callback on XLA's own threads (programs over "
        "1, 2 and 8 CPU devices; on one, small and busy), beside "
        "buffer_callback's (worker_threads.py)",
    )
    parser.add_argument(
        "--spline-orders",
        action="store_true",
        help="only map_coordinates of orders 2 to 5 (64^3 float64 grid, "
        "2^20 points): values against SciPy's, and the gradient",
    )
    args = parser.parse_args(argv)
    if args.rounds is None:
        args.rounds = QUICK_ROUNDS if args.quick else DEFAULT_ROUNDS
    if args.rounds < 1 or args.calls_per_round < 1:
        parser.error("--rounds and --calls-per-round must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    malloc_pinned = pin_malloc()
    start = time.perf_counter()
    if args.worker:
        kind, *rest = args.worker
        if kind == "sharded":
            report = sharded_worker(args.rounds, args.calls_per_round)
        elif kind == "map_coordinates_sharded":
            report = map_coordinates_sharded_worker(int(rest[0]), args.rounds)
        elif kind == "roofline":
            report = roofline_worker(int(rest[0]), rest[1] == "quick")
        elif kind == "worker_threads":
            report = worker_threads_worker(rest[0], args.rounds, busy=rest[1:] == ["busy"])
        elif kind == "map_coordinates_threads":
            report = map_coordinates_threads_worker(int(rest[0]), args.rounds)
        else:
            report = lifetime_worker(rest[0], int(rest[1]))
        print(json.dumps(report))
        return 0
    if args.roofline:
        return roofline_main(args, malloc_pinned, start)
    if args.cuda_host:
        report = cuda_host_main(args)
        if args.json:
            write_json(args.json, {**report, "environment": environment(malloc_pinned)})
        return 0
    if args.worker_threads:
        rows = measure_worker_threads(max(5, args.rounds // 10))
        print_worker_threads(rows)
        if args.json:
            write_json(
                args.json, {"worker_threads": rows, "environment": environment(malloc_pinned)}
            )
        return 0
    if args.grid_sweep or args.spline_orders:
        return sweep_main(args, malloc_pinned, start)
    cases, notes = all_cases()
    warm_up(cases)
    measure(cases, args.rounds, args.calls_per_round)
    # The native ops take milliseconds a call: fewer rounds, each comparison
    # interleaved within itself (see the module docstring).
    for group in map_coordinates_groups() + spline_groups():
        warm_up(group)
        measure(group, max(5, args.rounds // 20), 1, after_itself=True)
        cases += group
    sharded = [
        run_worker(
            [
                "--worker",
                "sharded",
                "--rounds",
                str(max(5, args.rounds // 10)),
                "--calls-per-round",
                str(args.calls_per_round),
            ],
            on_cpu_devices(devices),
        )
        for devices in dict.fromkeys(SHARDED_DEVICES)
    ]
    points = 1 << (20 if args.quick else 22)
    mc_sharded = run_worker(
        [
            "--worker",
            "map_coordinates_sharded",
            str(points),
            "--rounds",
            str(max(5, args.rounds // 20)),
        ],
        on_cpu_devices(8),
    )
    mc_threads = run_worker(
        [
            "--worker",
            "map_coordinates_threads",
            str(1 << 20),
            "--rounds",
            str(max(5, args.rounds // 20)),
        ],
        on_cpu_devices(8),
    )
    worker_threads = measure_worker_threads(max(5, args.rounds // 10))
    loops = 50 if args.quick else 1000
    lifetime = [
        run_worker(["--worker", "lifetime", kind, str(loops)])
        for kind in ("xlabind", "pure_callback")
    ]
    elapsed = time.perf_counter() - start

    results = {case.key: summarize(case) for case in cases}
    ratio_rows = ratios(results)
    print_report(cases, results, ratio_rows, notes, elapsed)
    for report in sharded:
        print_sharded(report)
    print_map_coordinates_sharded(mc_sharded)
    print_map_coordinates_threads(mc_threads)
    print_worker_threads(worker_threads)
    print_lifetime(lifetime)
    if args.json:
        report = {
            "results": list(results.values()),
            "ratios": ratio_rows,
            "notes": notes,
            "sharded": sharded,
            "map_coordinates_sharded": mc_sharded,
            "map_coordinates_threads": mc_threads,
            "worker_threads": worker_threads,
            "lifetime": lifetime,
            "rounds": args.rounds,
            "calls_per_round": args.calls_per_round,
            "quick": args.quick,
            "seconds": elapsed,
            "environment": environment(malloc_pinned),
        }
        write_json(args.json, report)
    return 0


def roofline_main(args: argparse.Namespace, malloc_pinned: bool, start: float) -> int:
    """--roofline: every native-op workload on one device with its baselines,
    then xlabind's calls on 8 devices (in a process of its own), then the
    machine's ceilings and the table."""
    rounds = max(3, args.rounds // 50)  # at most; fewer for the slow workloads
    results = measure_workloads(rounds, with_baselines=True, quick=args.quick)
    # The one-device results stand without the 8-device columns: a failure
    # there is reported (and kept in the JSON), not a run lost.
    sharded_error = None
    try:
        sharded = run_worker(
            ["--worker", "roofline", str(rounds), "quick" if args.quick else "all"],
            on_cpu_devices(8),
        )
    except WorkerFailed as error:
        sharded, sharded_error = None, str(error)
        print(f"the 8-device columns are missing: {error}", file=sys.stderr)
    table = print_roofline(results, sharded, threads=os.cpu_count() or 1)
    print(
        f"\n3 to {rounds} timed calls per case (about 2 s a workload), "
        f"{time.perf_counter() - start:.1f} s; jax {jax.__version__}, {os.cpu_count()} CPUs, "
        f"{platform_cpu()}"
    )
    if args.json:
        write_json(
            args.json,
            {
                "roofline": table,
                "results": results,
                "sharded": sharded,
                "sharded_error": sharded_error,
                "rounds": rounds,
                "seconds": time.perf_counter() - start,
                "environment": {**environment(malloc_pinned), "cpu": platform_cpu()},
            },
        )
    return 0


def platform_cpu() -> str:
    """The CPU's model name, as /proc/cpuinfo gives it (the ratios move with it)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "CPU model unknown"


def sweep_main(args: argparse.Namespace, malloc_pinned: bool, start: float) -> int:
    """--grid-sweep and --spline-orders: one table of native-op groups."""
    if args.grid_sweep:
        groups, report = map_coordinates_sweep(), print_sweep
    else:
        groups = spline_orders_groups(1 << (18 if args.quick else 20))
        report = print_spline_orders
    for group in groups:
        warm_up(group)
        measure(group, max(5, args.rounds // 20), 1, after_itself=True)
    results = {case.key: summarize(case) for group in groups for case in group}
    report(groups, results)
    calls = len(groups[0][0].times)
    print(
        f"\n{calls} timed calls per case, {time.perf_counter() - start:.1f} s; "
        f"jax {jax.__version__}, {os.cpu_count()} CPUs"
    )
    if args.json:
        write_json(
            args.json,
            {
                "results": list(results.values()),
                "rounds": args.rounds,
                "quick": args.quick,
                "environment": environment(malloc_pinned),
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
