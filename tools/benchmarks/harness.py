"""The benchmark's harness: a timed case, how cases are warmed up and timed
(interleaved, in a fresh random order each round), medians and percentiles,
workers in processes of their own, the JSON report. The groups of cases are
the other modules of this folder; main.py runs them."""

from __future__ import annotations

import ctypes
import dataclasses
import gc
import json
import os
import platform
import random
import sys
import time
from collections.abc import Callable
from typing import Any

# xlabind's callbacks run on the CPU only; on a machine with an accelerator jax
# would otherwise put the arrays (and the computation) there.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import xlabind  # noqa: E402
import xlabind.testing as xlabind_testing  # noqa: E402

DEFAULT_ROUNDS = 1000
QUICK_ROUNDS = 20
CALLS_PER_ROUND = 5
WARMUP_CALLS = 3
#: The worker entry point (main.py), run in fresh processes.
MAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "main.py")


@dataclasses.dataclass
class Case:
    key: str  # stable name for the JSON and the ratio lines
    label: str
    fn: Callable[[jax.Array], Any]  # already jitted
    x: jax.Array
    expected: np.ndarray | None = None  # checked once, so a broken case is not timed
    times: list[float] = dataclasses.field(default_factory=list)
    #: Whether in-place results are checked to be written during this case
    #: (a no-op leaves its result unwritten, which the check refuses).
    checks_unwritten: bool = True

    @property
    def n(self) -> int:
        return int(self.x.size)

    @property
    def size_label(self) -> str:
        return "x".join(str(d) for d in self.x.shape) if self.x.ndim > 1 else str(self.n)


def like(x) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def vector(n: int) -> jax.Array:
    # Values in [0, 1): every case sees finite, ordinary numbers.
    return jnp.asarray(np.random.default_rng(n).random(n))


class Ready:
    """A NumPy result where the timing loop expects a jax array."""

    def __init__(self, value):
        self.value = value

    def block_until_ready(self):
        return self.value


# -- timing ------------------------------------------------------------------
def pin_malloc() -> bool:
    """Stops glibc malloc from handing freed memory back to the kernel.

    Every n = 10^6 call allocates an 8 MB result. With glibc's defaults, once
    the process has run a while, freeing it returns the pages to the kernel
    and the next call faults them back in: millions of page faults whose cost
    grows over the run and swamps what the cases differ in (a 400-round run
    measured 3.6 million faults, and 2-3x slower large cases, than with this).
    Returns whether it applied (glibc only).
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    # 32 MiB is the largest mmap threshold glibc accepts on 64-bit machines.
    return bool(mallopt(m_trim_threshold, 1 << 30)) and bool(mallopt(m_mmap_threshold, 32 << 20))


def warm_up(cases: list[Case]) -> None:
    """Compiles every case, checks its result once, and runs it a few times."""
    for case in cases:
        xlabind_testing.set_unwritten_result_checks(case.checks_unwritten)
        result = case.fn(case.x).block_until_ready()
        if case.expected is not None:
            np.testing.assert_allclose(
                np.asarray(result),
                case.expected,
                rtol=1e-12,
                atol=1e-12,
                err_msg=f"benchmark case {case.key} computes a wrong result",
            )
        for _ in range(WARMUP_CALLS):
            case.fn(case.x).block_until_ready()
    xlabind_testing.set_unwritten_result_checks(True)


def measure(
    cases: list[Case], rounds: int, calls: int, seed: int = 0, after_itself: bool = False
) -> None:
    """Appends `rounds * calls` timings to every case, the cases interleaved;
    with `after_itself`, each timed call follows an untimed one of its case."""
    order = list(cases)
    rng = random.Random(seed)  # a fresh order each round, so no case always follows another
    clock = time.perf_counter
    for _ in range(rounds):
        rng.shuffle(order)
        # A collection inside a timed call would land on whichever case made
        # the garbage overflow; between rounds it lands on none.
        gc.disable()
        try:
            for case in order:
                f, x, times = case.fn, case.x, case.times
                xlabind_testing.set_unwritten_result_checks(case.checks_unwritten)
                for _ in range(calls):
                    if after_itself:
                        f(x).block_until_ready()
                    start = clock()
                    f(x).block_until_ready()
                    times.append(clock() - start)
        finally:
            gc.enable()
            xlabind_testing.set_unwritten_result_checks(True)


def _us(seconds: float) -> float:
    return seconds * 1e6


def summarize(case: Case) -> dict:
    times = np.asarray(case.times)
    p10, p25, median, p75, p90 = np.percentile(times, [10, 25, 50, 75, 90])
    return {
        "key": case.key,
        "case": case.label,
        "n": case.n,
        "shape": list(case.x.shape),
        "calls": len(times),
        "median_us": _us(median),
        "p10_us": _us(p10),
        "p25_us": _us(p25),
        "p75_us": _us(p75),
        "p90_us": _us(p90),
        "min_us": _us(times.min()),
    }


def environment(malloc_pinned: bool) -> dict:
    import jaxlib

    return {
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "numpy": np.__version__,
        "xlabind": xlabind.__version__,
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "devices": [str(d) for d in jax.devices()],
        "malloc_pinned": malloc_pinned,
    }


def _output_path(path: str) -> str:
    # `bazel run` starts the program in its runfiles; a relative path means the
    # directory the user ran bazel from.
    return os.path.join(os.environ.get("BUILD_WORKING_DIRECTORY", ""), path)


def write_json(path: str, report: dict) -> None:
    with open(_output_path(path), "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")


def run_worker(args: list[str], env: dict | None = None) -> dict:
    """Runs main.py as a worker in a fresh process; returns what it prints."""
    import subprocess

    out = subprocess.run(
        [sys.executable, MAIN, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if out.returncode != 0:
        raise WorkerFailed(
            f"benchmark worker {' '.join(args)} exited with {out.returncode}:\n"
            + (
                out.stderr
                if len(out.stderr) <= 6000
                else f"{out.stderr[:3000]}\n...\n{out.stderr[-3000:]}"
            )
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


class WorkerFailed(RuntimeError):
    """A worker process failed; the message ends with its stderr."""
