"""The benchmark's roofline (tools/benchmarks/roofline.py): the probes report
what they measured in the units the table reads, refuse what they cannot
measure, and the table's bounds and fractions are what the probes and the
model give. No timing is asserted on."""

import json
import os
import subprocess

import pytest

# The Bazel-built probe, in this test's runfiles.
os.environ["XLABIND_MACHINE_PROBE"] = os.path.abspath("tools/machine_probe")

import roofline


def probe(*args):
    out = subprocess.run(
        [os.environ["XLABIND_MACHINE_PROBE"], *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out.returncode, out.stdout, out.stderr


@pytest.mark.parametrize("dtype,size", [("f32", 4), ("f64", 8)])
@pytest.mark.parametrize("reads,writes", [(3, 1), (4, 0), (0, 1), (4, 3)])
def test_a_stream_pass_reports_its_bytes(dtype, size, reads, writes):
    code, out, err = probe("stream", dtype, reads, writes, 10_000, 2)
    assert code == 0, err
    report = json.loads(out)
    assert report["bytes"] == 10_000 * (reads + writes) * size
    assert report["seconds"] > 0


def test_fma_chains_report_their_operations():
    for dtype, lanes in (("f32", 8), ("f64", 4)):
        code, out, err = probe("fma", dtype, 1)
        assert code == 0, err
        report = json.loads(out)
        # 12 chains of 2^24 FMAs, printed to 9 digits.
        assert report["flops"] == pytest.approx(2 * 12 * lanes * (1 << 24), rel=1e-8)
        assert report["seconds"] > 0


@pytest.mark.parametrize("mode", ["gather", "scatter"])
@pytest.mark.parametrize("nodes", range(1, 7))
def test_node_accesses_run_for_every_order(mode, nodes):
    for dtype in ("f32", "f64"):
        code, out, err = probe("nodes", mode, dtype, 16, nodes, 5_000, 2)
        assert code == 0, err
        assert json.loads(out)["seconds"] > 0


@pytest.mark.parametrize(
    "args,message",
    [
        (("stream", "f64", 6, 1, 100, 1), "reads 0-5"),
        (("nodes", "gather", "f64", 16, 7, 100, 1), "1 to 6 nodes"),
        (("nodes", "gather", "f64", 3, 4, 100, 1), "1 to 6 nodes"),
        (("bandwidth",), "usage"),
    ],
)
def test_the_probe_refuses_what_it_cannot_measure(args, message):
    code, out, err = probe(*args)
    assert code == 2 and out == ""
    assert message in err


def _workload(kind, order, op="map_coordinates", side=64, dtype="float64"):
    return roofline.Workload(op, kind, order, side, dtype, points=1000)


def test_the_model_of_each_kind():
    values = _workload("values", 1)
    assert values.streams() == [(3, 1, 1000)] and values.visits() == ("gather", 2)
    grad = _workload("grid gradient", 3)
    assert grad.streams() == [(4, 0, 1000), (0, 1, 64**3)]
    assert grad.visits() == ("scatter", 4)
    coords = _workload("coordinate gradient", 3)
    assert coords.streams() == [(4, 3, 1000)] and coords.visits() == ("gather", 4)
    # One nested sum per axis; the nodes read once.
    assert coords.flops() == 3 * _workload("values", 3).flops()
    assert _workload("values", 0).flops() == 0
    # n^3 + n^2 + n multiply-adds and 3 axes of n weights of degree k, a point.
    n, k = 4, 3
    assert _workload("values", 3).flops() == 2 * (n**3 + n**2 + n + 3 * n * k) * 1000
    spline = _workload("values", 5, op="spline_filter")
    assert spline.streams() == [(1, 1, 64**3)] and spline.visits() is None
    assert spline.flops() == 2 * 64**3 * 3 * (2 * 2 + 1)  # two poles


def test_workloads_cover_every_order_dtype_grid_and_kind():
    seen = {(w.op, w.kind, w.order, w.side, w.dtype) for w in roofline.workloads()}
    for side in (64, 256):
        for dtype in ("float32", "float64"):
            for order in range(6):
                for kind in ("values", "grid gradient"):
                    assert ("map_coordinates", kind, order, side, dtype) in seen
            for order in range(1, 6):
                assert ("map_coordinates", "coordinate gradient", order, side, dtype) in seen
            for order in range(2, 6):
                assert ("spline_filter", "transpose", order, side, dtype) in seen
    assert {w.side for w in roofline.workloads(quick=True)} == {64}


def test_bounds_are_the_largest_probe_and_the_table_their_share(capsys):
    machine = roofline.Machine(2)
    w = _workload("values", 1)
    bounds = machine.bounds(w)
    assert bounds["bound"] == max(bounds["stream"], bounds["nodes"], bounds["fma"])
    assert bounds[bounds["binding"]] == bounds["bound"]
    ours_us = 4 * bounds["bound"] * 1e6  # the bound is a quarter of the call
    results = {w.key: {"xlabind": ours_us, "jax": 2 * ours_us, "bounds": bounds}}
    sharded = {"devices": 8, "results": {w.key: {"xlabind": 5 * ours_us}}}
    table = roofline.report(results, sharded, threads=2)
    printed = capsys.readouterr().out
    row = next(line for line in printed.splitlines() if line.startswith("map_coordinates"))
    assert "jax" in row and " 2.00 " in row  # jax / xlabind
    assert row.split()[-3] == "25%" and row.split()[-1] == "5%"  # 1 device, 8 devices
    [entry] = table["rows"]
    assert entry["fraction_of_bound"] == pytest.approx(0.25)
    assert entry["sharded_ms"] == pytest.approx(5 * ours_us / 1e3)
