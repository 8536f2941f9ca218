"""The benchmark's worker-thread rows (tools/benchmarks/worker_threads.py)
measure what they say: a one-device program's calls run on the caller's
thread, and a program over several devices runs them on XLA's threads, for
every kind, each in a process of its own. No timing is asserted on."""

import os

import pytest
import worker_threads
from harness import run_worker


@pytest.mark.parametrize("devices,threads", [(1, "the caller's"), (2, "XLA's")])
@pytest.mark.parametrize("kind", worker_threads.KINDS)
def test_each_row_runs_where_its_label_says(kind, devices, threads):
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
    report = run_worker(["--worker", "worker_threads", kind, "--rounds", "2"], {"XLA_FLAGS": flags})
    if "missing" in report:  # a jax without buffer_callback
        assert kind == "buffer_callback", report
        return
    assert report["kind"] == kind and report["devices"] == devices
    assert report["threads"] == threads, report
    assert report["program_ms"] > 0 and report["native_program_ms"] > 0
    assert isinstance(report["us_per_call"], float)


def test_the_table_has_a_row_per_device_count(capsys):
    rows = [
        {"kind": k, "devices": n, "us_per_call": 1.0 + i, "threads": "XLA's"}
        for n in worker_threads.DEVICES
        for i, k in enumerate(worker_threads.KINDS)
    ]
    worker_threads.print_worker_threads(rows)
    lines = capsys.readouterr().out.strip().splitlines()
    table = [line.split() for line in lines[2:]]
    assert [int(row[0]) for row in table] == list(worker_threads.DEVICES)
    # unchecked / buffer_callback: 2.0 / 3.0
    assert all(row[-1] == "0.67" for row in table), lines
