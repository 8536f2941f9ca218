"""The benchmark's one harness (tools/benchmarks/harness.py) as the device rows
use it, on the CPU: cases interleaved in a fresh order each round within a
budget, percentiles, Markdown tables; the TPU rows' table (tpu_ops.py) on a
small grid; and how the GPU rows (cuda_rows.py) time kernels on the device."""

import time
import types

import cuda_rows
import harness
import jax
import numpy as np
import tpu_ops

import xlabind


def test_cases_are_interleaved_in_a_fresh_order_each_round():
    order = []
    samplers = {name: (lambda name=name: order.append(name) or 0.001) for name in "abcd"}
    times = harness.interleaved(samplers, rounds=6, calls=2, seed=3)
    assert {name: len(t) for name, t in times.items()} == dict.fromkeys("abcd", 12)
    rounds = [tuple(order[i : i + 8 : 2]) for i in range(0, len(order), 8)]
    assert all(sorted(r) == list("abcd") for r in rounds)
    assert len(set(rounds)) > 1  # not one fixed order: no case always follows another


def test_a_case_past_its_budget_stops_after_five_samples():
    samplers = {"slow": lambda: 1.0, "fast": lambda: 1e-6}
    times = harness.interleaved(samplers, rounds=20, budget_s=2.0)
    assert len(times["slow"]) == 5 and len(times["fast"]) == 20


def test_quantiles_are_in_microseconds_and_count_the_samples():
    q = harness.quantiles_us([0.001 * i for i in range(1, 12)])  # 1 ms to 11 ms
    assert q["count"] == 11 and q["min"] == 1000.0
    assert q["p10"] < q["p25"] < q["p50"] == 6000.0 < q["p75"] < q["p90"]


def test_a_program_that_fails_leaves_the_others_timed():
    def broken(x):
        raise MemoryError("out of memory")

    medians = harness.interleaved_medians(
        {"sum": jax.jit(lambda x: x.sum()), "broken": broken}, (np.ones(4),), rounds=3
    )
    assert isinstance(medians["sum"], float) and medians["sum"] > 0
    assert medians["broken"].startswith("failed: MemoryError")


def test_the_tpu_rows_split_the_first_call_and_compare_with_jax(monkeypatch):
    monkeypatch.setattr(tpu_ops, "CASES", (((8, 8), (64,)),))
    lines = list(tpu_ops.table_lines(rounds=2, cases=tpu_ops.CASES))
    assert lines[0].startswith("| grid (float32) | points (mode nearest) | case | ms |")
    assert lines[1] == "| --- | --- | --- | --- | --- | --- |"
    rows = {line.split(" | ")[2]: line.strip("| ").split(" | ") for line in lines[2:]}
    assert set(rows) >= {"jax order 1", "xlabind order 1", "xlabind order 3 + prefilter"}
    first_call = rows["xlabind order 1"][4]  # "total (lower + compile + run)"
    total, split = first_call.split(" ", 1)
    assert split.count("+") == 2 and float(total) >= 0
    assert rows["xlabind order 1"][5].endswith("x faster than jax")


def test_gpu_kernel_times_are_spans_of_repeated_runs():
    """cuda_rows' device times: one run between two CUDA events counts the
    launch gaps at both ends, pulling every ratio toward 1. The timed program
    runs the operation REPEATS times between its markers, on copies of the
    arguments XLA cannot merge, and the time reported is the span over
    REPEATS; cupyx's cases likewise. Here on the CPU, with events that read
    the host clock and an operation that sleeps 20 ms."""
    bench = cuda_rows
    assert bench.REPEATS >= 4

    class Event:  # CuPy's, as far as the benchmark uses it
        def record(self):
            self.seconds = time.perf_counter()

        def synchronize(self):
            pass

    def elapsed_ms(start, stop):
        return (stop.seconds - start.seconds) * 1e3

    bench.cp = types.SimpleNamespace(
        cuda=types.SimpleNamespace(Event=Event, get_elapsed_time=elapsed_ms)
    )
    log, events = [], []

    def marker(*xs, out):
        event = Event()
        event.record()
        events.append(event)
        log.append("marker")
        out[...] = 0

    def run(x):
        time.sleep(0.02)
        log.append("run")
        return x

    token = lambda *xs: jax.ShapeDtypeStruct((), np.int32)
    mark = xlabind.callback(marker, token, in_place=True)
    # A native, side-effect-free operation XLA would merge on equal buffers.
    sine = bench._timed_on_device(jax.numpy.sin, mark)
    compiled = sine.lower(bench._copies((np.ones(4, np.float32),), 8)).compile().as_text()
    assert compiled.count(" sine(") == 8, compiled

    timed = bench._timed_on_device(xlabind.callback(run, lambda x: x), mark)
    times = bench._device_times(
        {"op": timed},
        {"op": (np.ones(4, np.float32),)},
        2,
        events,
        {"cupyx": lambda: time.sleep(0.02)},
        repeats=8,
    )
    # Each timed call: the markers around eight runs (two warm-up calls first).
    assert log == ["marker", *["run"] * 8, "marker"] * 4, log
    # One run's time (>= 20 ms), not eight runs' (>= 160 ms).
    for case in ("op", "cupyx"):
        assert len(times[case]) == 2 and all(0.02 <= t < 0.08 for t in times[case]), times


def test_a_gpu_group_that_fails_is_reported_in_its_table():
    report = {"group": "graph", "flags": "--x", "seconds": 3.0, "error": "timed out after 45 s"}
    lines = cuda_rows.group_lines(report)
    assert lines[0].strip() == "## graph (XLA_FLAGS='--x', 3.0 s)"
    assert lines[-1] == "failed: timed out after 45 s"
