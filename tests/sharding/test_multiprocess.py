"""jax's multi-controller runtime, as users scale past one host: 2 processes x
4 virtual CPU devices (jax.distributed on 127.0.0.1, gloo collectives on
loopback), each running tests/sharding/multiprocess_worker.py. Checks the numbers
against one process, and per process the calls made and the shapes they saw.

The workers run in a process group of their own, killed when they overrun
their deadline or the test ends, so a hang fails this test and leaves nothing
behind."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import doc_blocks
import jax
import jax.numpy as jnp
import numpy as np
import pytest

jax.config.update("jax_enable_x64", True)

WORKER = Path(__file__).with_name("multiprocess_worker.py")
SHARDING_GUIDE = Path("docs/guides/sharding.md")  # in the runfiles
PROCESSES = 2
DEADLINE_S = 100  # both workers together; a run takes about 10 s on 2 cores


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_processes(tmp_path: Path, command, env=None) -> tuple[list[int], str]:
    """Runs `command(i)` for each process i in a process group of its own,
    killed at the deadline; returns the exit codes and the logs' tails. A
    hang fails the test."""
    logs = [open(tmp_path / f"process_{i}.log", "w") for i in range(PROCESSES)]
    workers = [
        subprocess.Popen(
            command(i),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env(i) if env else None,
        )
        for i, log in enumerate(logs)
    ]
    deadline = time.monotonic() + DEADLINE_S
    try:
        for worker in workers:
            worker.wait(timeout=max(deadline - time.monotonic(), 1))
    except subprocess.TimeoutExpired:
        pass
    finally:
        hung = [w.pid for w in workers if w.poll() is None]
        for worker in workers:  # the group: anything a worker started goes too
            try:
                os.killpg(worker.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for worker, log in zip(workers, logs):
            worker.wait()
            log.close()
    text = "\n".join(
        f"--- process {i} ---\n" + (tmp_path / f"process_{i}.log").read_text()[-4000:]
        for i in range(PROCESSES)
    )
    assert not hung, f"workers {hung} still ran after {DEADLINE_S} s:\n{text}"
    return [w.returncode for w in workers], text


def run_workers(tmp_path: Path) -> list[dict]:
    """The workers' reports, once both exited; fails on a hang or a crash."""
    port = free_port()
    outputs = [tmp_path / f"process_{i}.json" for i in range(PROCESSES)]
    codes, text = run_processes(
        tmp_path, lambda i: [sys.executable, str(WORKER), str(i), str(port), str(outputs[i])]
    )
    reports = []
    for i, (code, out) in enumerate(zip(codes, outputs)):
        assert out.exists(), f"process {i} wrote no report (exit {code}):\n{text}"
        report = json.loads(out.read_text())
        assert report.get("done"), f"process {i} stopped after {list(report['cases'])}:\n{text}"
        assert code == 0, f"process {i} exited {code}:\n{text}"
        reports.append(report)
    return reports


def test_the_sharding_guides_multiprocess_block(tmp_path):
    """docs/guides/sharding.md's block marked `multiprocess`, as the whole
    script of each process, configured as the page says."""
    (block,) = [b for b in doc_blocks.blocks(SHARDING_GUIDE) if b.place == "multiprocess"]
    script = tmp_path / "guide.py"
    script.write_text("\n" * (block.line - 1) + block.code)
    port = free_port()

    def env(i):
        return {
            **os.environ,
            "JAX_PLATFORMS": "cpu",
            "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
            "XLABIND_COORDINATOR": f"127.0.0.1:{port}",
            "XLABIND_NUM_PROCESSES": str(PROCESSES),
            "XLABIND_PROCESS_ID": str(i),
        }

    codes, text = run_processes(tmp_path, lambda i: [sys.executable, str(script)], env)
    assert codes == [0] * PROCESSES, text


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> list[dict]:
    """Per process: case name -> what it saw."""
    reports = run_workers(tmp_path_factory.mktemp("multiprocess"))
    assert [r["process"] for r in reports] == list(range(PROCESSES))
    for report in reports:
        for name, case in report["cases"].items():
            assert "exception" not in case, (
                f"process {report['process']}, {name}:\n{case['exception']}"
            )
    return [r["cases"] for r in reports]


ROWS = np.arange(64.0).reshape(16, 4)
PER_DEVICE = [[[2, 4]]] * 4  # each of a process's 4 devices: its (2, 4) rows


def test_without_a_rule_the_call_runs_once_on_process_0(cases):
    for case in (cases[0]["no_rule"], cases[1]["no_rule"]):
        np.testing.assert_array_equal(case["y"], 2 * ROWS)
    assert cases[0]["no_rule"]["calls"] == [[[16, 4]]]
    assert cases[1]["no_rule"]["calls"] == []


def test_with_a_rule_each_device_calls_on_its_rows(cases):
    for process in cases:
        np.testing.assert_array_equal(process["rule"]["y"], 2 * ROWS)
        assert process["rule"]["spec"] == "P('d',)"
        assert process["rule"]["calls"] == PER_DEVICE
        # The same, where process 1 had bound more functions first (its keys differ).
        np.testing.assert_array_equal(process["different_registry_keys"]["y"], 2 * ROWS + 1)
        assert process["different_registry_keys"]["calls"] == PER_DEVICE


def test_gradients_stay_sharded(cases):
    for process in cases:
        np.testing.assert_allclose(process["grad"]["g"], 2 * np.cos(2 * ROWS), rtol=1e-12)
        assert process["grad"]["calls"] == PER_DEVICE * 2  # forward and transpose


def test_a_contraction_sums_partial_products_across_processes(cases):
    a, b = np.arange(48.0).reshape(3, 16) / 16, np.arange(32.0).reshape(16, 2) / 16
    ga, gb = jax.grad(lambda a, b: jnp.sum(jnp.sin(a @ b)), argnums=(0, 1))(a, b)
    for process in cases:
        case = process["contraction"]
        np.testing.assert_allclose(case["y"], a @ b, rtol=1e-12)
        np.testing.assert_allclose(case["ga"], ga, rtol=1e-12)
        np.testing.assert_allclose(case["gb"], gb, rtol=1e-12)
        # Each device multiplies its 2 of the 16 columns of a by its 2 rows of
        # b: the summed factor is never gathered.
        assert case["forward_calls"] == [[[3, 2], [2, 2]]] * 4
        # The backward pass: the forward again (for sin's derivative), then
        # each transpose on its shard.
        assert sorted(case["calls"]) == sorted(
            [[[2, 2], [3, 2]]] * 4 + [[[3, 2], [2, 2]]] * 4 + [[[3, 2], [3, 2]]] * 4
        )


@pytest.mark.parametrize("method", ["expand_dims", "broadcast_all", "native"])
def test_vmap_methods_that_keep_the_batch_sharded(cases, method):
    for process in cases:
        case = process[f"vmap_{method}"]
        np.testing.assert_array_equal(case["y"], np.cumsum(ROWS, axis=1))
        assert case["spec"] == "P('d',)"
        assert case["calls"] == PER_DEVICE


def test_sequential_vmap_loops_once_per_program(cases):
    # As the sharding guide says: the loop runs on whole arrays, on process 0.
    for process in cases:
        np.testing.assert_array_equal(process["vmap_sequential"]["y"], np.cumsum(ROWS, axis=1))
    assert cases[0]["vmap_sequential"]["calls"] == [[[4]]] * 16
    assert cases[1]["vmap_sequential"]["calls"] == []


def test_shard_map_calls_once_per_device(cases):
    for process in cases:
        case = process["shard_map"]
        np.testing.assert_array_equal(case["y"], 2 * ROWS)
        np.testing.assert_array_equal(case["g"], 8 * ROWS)
        assert case["forward_calls"] == PER_DEVICE


@pytest.mark.parametrize("mode", ["constant", "wrap"])
def test_map_coordinates_values_and_both_gradients(cases, mode):
    from jax.scipy.ndimage import map_coordinates as reference

    grid = np.sin(np.arange(6 * 7 * 5.0)).reshape(6, 7, 5)
    coords = [np.linspace(-0.5, s - 0.3, 64) for s in grid.shape]

    def loss(grid, *coords):
        return jnp.sum(jnp.sin(reference(grid, list(coords), 1, mode, cval=0.5)))

    values = reference(grid, coords, 1, mode, cval=0.5)
    grads = jax.grad(loss, argnums=(0, 1, 2, 3))(grid, *coords)
    for process in cases:
        case = process[f"map_coordinates_{mode}"]
        np.testing.assert_allclose(case["values"], values, rtol=1e-12, atol=1e-14)
        assert case["spec"] == "P('d',)"  # the points stay on their devices
        for ours, theirs in zip(case["grads"], grads):
            np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


def test_a_failure_on_one_process_stops_both_promptly(cases):
    for process in cases:
        case = process["failure_with_rule"]
        assert case["error"] is not None and case["seconds"] < 20, case
        # Process 1 raised: its own exception, and on process 0 the same
        # message, naming the function and the process it failed on.
        assert "xlabind callback 'refuses' raised ValueError: refused on process 1" in case["error"]
        assert "on device 4 (process 1) of the 8 that ran the call" in case["error"]
        case = process["failure_without_rule"]
        assert case["error"] is not None and case["seconds"] < 20, case
        assert "xlabind callback 'refuses' raised ValueError: refused on process 0" in case["error"]
        assert "the call ran once, on the program's first device (process 0)" in case["error"]
