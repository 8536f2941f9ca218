"""The benchmark's worker-thread rows (tools/benchmarks/worker_threads.py)
measure what they say: a small one-device program's calls run on the caller's
thread, a busy one's (xlabind's) and a program over several devices' on XLA's
threads, for every kind, each in a process of its own. No timing is asserted
on."""

import os

import pytest
import worker_threads
from harness import run_worker

# The busy one-device row for xlabind only: on one device xlabind_unchecked is
# the same call, and XLA's CPU client places a program with buffer_callback by
# rules of its own (inline or not from run to run in jax 0.10.2; the table
# shows where it ran).
CASES = [
    *[(kind, 1, False, "the caller's") for kind in worker_threads.KINDS],
    *[(kind, 2, False, "XLA's") for kind in worker_threads.KINDS],
    ("xlabind", 1, True, "XLA's"),
]


@pytest.mark.parametrize("kind,devices,busy,threads", CASES)
def test_each_row_runs_where_its_label_says(kind, devices, busy, threads):
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
    report = run_worker(worker_threads.worker_arguments(kind, busy, 2), {"XLA_FLAGS": flags})
    if "missing" in report:  # a jax without buffer_callback
        assert kind == "buffer_callback", report
        return
    assert report["kind"] == kind and report["devices"] == devices and report["busy"] == busy
    assert report["threads"] == threads, report
    assert report["program_ms"] > 0 and report["native_program_ms"] > 0
    assert isinstance(report["us_per_call"], float)


def test_the_table_has_a_line_per_row(capsys):
    rows = [
        {"kind": k, "devices": n, "busy": busy, "us_per_call": 1.0 + i, "threads": "XLA's"}
        for n, busy in worker_threads.ROWS
        for i, k in enumerate(worker_threads.KINDS)
    ]
    worker_threads.print_worker_threads(rows)
    lines = capsys.readouterr().out.strip().splitlines()
    table = [line.split() for line in lines[2:]]
    assert [int(row[0]) for row in table] == [n for n, _ in worker_threads.ROWS]
    # xlabind / buffer_callback: 1.0 / 3.0; unchecked / buffer_callback: 2.0 / 3.0
    assert all(row[-2:] == ["0.33", "0.67"] for row in table), lines
    assert [row[1] for row in table] == [
        "busy" if busy else "small" for _, busy in worker_threads.ROWS
    ]
