"""The benchmark's TPU rows: a Python function called 16 times in one TPU
program, xlabind against jax.pure_callback doing the same work, and the
device -> host -> device round trip outside a program as the floor. The
programs are timed interleaved, a fresh order each round; a row is the
median program time divided by the calls in it. On the default backend
(a TPU on the TPU machine; tools/tpu_check.py runs it there)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

import xlabind

CHAINED = 16
SIZES = (256, 2**20)


def _scaled(a):
    return a * np.float32(1.0001)


def _scaled_into(a, *, out):
    np.multiply(a, np.float32(1.0001), out=out)


def _chain(call: Callable) -> Callable:
    def program(x):
        for _ in range(CHAINED):
            x = call(x)
        return x

    return jax.jit(program)


def programs() -> dict[str, Callable]:
    like = lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype)
    returning = xlabind.callback(_scaled, like)
    in_place = xlabind.callback(_scaled_into, like, in_place=True)
    return {
        "jax.pure_callback": _chain(lambda x: jax.pure_callback(_scaled, like(x), x)),
        "xlabind.callback": _chain(returning),
        "xlabind.callback in_place": _chain(in_place),
    }


def _round_trip(x):
    return jax.device_put(np.asarray(x), x.devices().pop())


def rows(rounds: int = 15) -> Iterator[dict]:
    """One row per size and case, with its ratio to jax.pure_callback."""
    cases = programs()
    for n in SIZES:
        x = jnp.linspace(0.0, 1.0, n, dtype=jnp.float32)
        expected = np.asarray(x) * np.float32(1.0001) ** CHAINED
        times: dict[str, list[float]] = {name: [] for name in cases}
        for name, program in cases.items():
            np.testing.assert_allclose(program(x), expected, rtol=1e-5, err_msg=name)
        trips = []
        order = list(cases)
        rng = random.Random(n)
        for _ in range(rounds):
            rng.shuffle(order)
            for name in order:
                start = time.perf_counter()
                cases[name](x).block_until_ready()
                times[name].append(time.perf_counter() - start)
            start = time.perf_counter()
            _round_trip(x).block_until_ready()
            trips.append(time.perf_counter() - start)
        base = float(np.median(times["jax.pure_callback"]))
        for name, ts in times.items():
            median = float(np.median(ts))
            yield {
                "n": n,
                "case": name,
                "ms_per_call": median / CHAINED * 1e3,
                "ratio": median / base,
            }
        yield {
            "n": n,
            "case": "np.asarray + device_put, outside a program",
            "ms_per_call": float(np.median(trips)) * 1e3,
            "ratio": float("nan"),
        }


def table_lines() -> Iterator[str]:
    yield f"| n (float32) | case ({CHAINED} chained) | ms a call | vs pure_callback |"
    yield "| --- | --- | --- | --- |"
    for row in rows():
        ratio = "" if row["ratio"] != row["ratio"] else f"{row['ratio']:.2f}x"
        yield f"| {row['n']} | {row['case']} | {row['ms_per_call']:.3f} | {ratio} |"
