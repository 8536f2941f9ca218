"""The benchmark's one harness, for the CPU, GPU and TPU rows alike: how
cases are timed (interleaved, in a fresh random order each round), their
percentiles, Markdown tables, workers in processes of their own, the JSON
report; and the CPU rows' timed case and warm-up. The groups of cases are
the other modules of this folder; main.py runs the CPU ones, cuda_rows.py and
tpu_ops.py a device's."""

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
from collections.abc import Callable, Iterable, Iterator
from typing import Any

# The CPU rows run on the CPU (xlabind's callbacks run there; a machine's
# accelerator would otherwise take the arrays) and in float64. A device's rows
# (cuda_rows.py, tpu_ops.py) set JAX_PLATFORMS before importing this module
# and keep jax's float32 default, as their users do.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", os.environ["JAX_PLATFORMS"] == "cpu")

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


def interleaved(
    samplers: dict[str, Callable[[], float]],
    rounds: int,
    *,
    calls: int = 1,
    seed: int = 0,
    budget_s: float = float("inf"),
) -> dict[str, list[float]]:
    """Each case's samples: `samplers` maps a case to a function that takes one
    sample and returns its seconds. Every round runs each case in turn, in a
    fresh random order (so no case always follows another), `calls` samples
    each; a case stops once it has spent `budget_s` and has 5 samples."""
    times: dict[str, list[float]] = {name: [] for name in samplers}
    spent = dict.fromkeys(samplers, 0.0)
    order = list(samplers)
    rng = random.Random(seed)
    for _ in range(rounds):
        rng.shuffle(order)
        # A collection inside a timed call would land on whichever case made
        # the garbage overflow; between rounds it lands on none.
        gc.disable()
        try:
            for name in order:
                if spent[name] > budget_s and len(times[name]) >= 5:
                    continue
                for _ in range(calls):
                    seconds = samplers[name]()
                    times[name].append(seconds)
                    spent[name] += seconds
        finally:
            gc.enable()
    return times


def measure(
    cases: list[Case], rounds: int, calls: int, seed: int = 0, after_itself: bool = False
) -> None:
    """Appends `rounds * calls` timings to every case, the cases interleaved;
    with `after_itself`, each timed call follows an untimed one of its case."""
    clock = time.perf_counter

    def sampler(case: Case) -> Callable[[], float]:
        f, x = case.fn, case.x

        def sample() -> float:
            xlabind_testing.set_unwritten_result_checks(case.checks_unwritten)
            if after_itself:
                f(x).block_until_ready()
            start = clock()
            f(x).block_until_ready()
            return clock() - start

        return sample

    try:
        times = interleaved(
            {str(i): sampler(case) for i, case in enumerate(cases)}, rounds, calls=calls, seed=seed
        )
    finally:
        xlabind_testing.set_unwritten_result_checks(True)
    for i, case in enumerate(cases):
        case.times += times[str(i)]


def interleaved_medians(
    programs: dict[str, Callable], args, rounds: int, seed: int = 0
) -> dict[str, float | str]:
    """Median milliseconds of each jax program on `args` (its first call
    untimed), interleaved, or why it could not run: one that fails, out of
    memory say, leaves the others timed."""
    failed: dict[str, float | str] = {}
    ready: dict[str, Callable] = {}
    for name, f in programs.items():
        try:
            jax.block_until_ready(f(*args))
            ready[name] = f
        except Exception as error:
            failed[name] = f"failed: {type(error).__name__}: {str(error)[:160]}"

    def sampler(f: Callable) -> Callable[[], float]:
        def sample() -> float:
            start = time.perf_counter()
            jax.block_until_ready(f(*args))
            return time.perf_counter() - start

        return sample

    times = interleaved({name: sampler(f) for name, f in ready.items()}, rounds, seed=seed)
    return {**{name: float(np.median(t)) * 1e3 for name, t in times.items()}, **failed}


def chained(call: Callable, k: int) -> Callable:
    """jit of `k` calls in one program, each on the last one's result: a
    call's cost without a dispatch of its own."""

    def program(x):
        for _ in range(k):
            x = call(x)
        return x

    return jax.jit(program)


def quantiles_us(seconds: Iterable[float]) -> dict:
    """Percentiles of samples in seconds, in µs, and how many there were."""
    times = np.asarray(list(seconds))
    p10, p25, p50, p75, p90 = np.percentile(times, [10, 25, 50, 75, 90]) * 1e6
    return {
        "p10": p10,
        "p25": p25,
        "p50": p50,
        "p75": p75,
        "p90": p90,
        "min": times.min() * 1e6,
        "count": len(times),
    }


def markdown_table(header: list[str], rows: Iterable[list]) -> Iterator[str]:
    """A Markdown table's lines, each row as soon as it comes (a device's rows
    are printed while later ones are measured)."""
    yield "| " + " | ".join(header) + " |"
    yield "|" + " --- |" * len(header)
    for row in rows:
        yield "| " + " | ".join(str(cell) for cell in row) + " |"


def summarize(case: Case) -> dict:
    q = quantiles_us(case.times)
    return {
        "key": case.key,
        "case": case.label,
        "n": case.n,
        "shape": list(case.x.shape),
        "calls": q["count"],
        "median_us": q["p50"],
        **{f"p{p}_us": q[f"p{p}"] for p in (10, 25, 75, 90)},
        "min_us": q["min"],
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


def on_cpu_devices(devices: int) -> dict:
    """A worker's environment for `devices` virtual CPU devices."""
    flags = os.environ.get("XLA_FLAGS", "")
    return {"XLA_FLAGS": f"{flags} --xla_force_host_platform_device_count={devices}"}


def run_worker(
    args: list[str], env: dict | None = None, script: str = MAIN, timeout: float | None = None
) -> dict:
    """Runs `script` (main.py) as a worker in a fresh process, at most
    `timeout` seconds; returns the JSON it prints last."""
    import subprocess

    try:
        out = subprocess.run(
            [sys.executable, script, *args],
            capture_output=True,
            text=True,
            env={**os.environ, **(env or {})},
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:  # the worker is killed
        message = f"benchmark worker {' '.join(args)} timed out after {timeout:.0f} s"
        raise WorkerFailed(message) from None
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
