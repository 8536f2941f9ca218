"""The benchmark's TPU rows: a Python function called 16 times in one TPU
program, xlabind against jax.pure_callback doing the same work, and the
device -> host -> device round trip outside a program as the floor. The
programs are timed interleaved, a fresh order each round; a row is the
median program time divided by the calls in it. On the default backend
(a TPU on the TPU machine: tpu_ops.py prints these rows with its own)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from harness import chained, interleaved_medians, jax, jnp, markdown_table, np, xlabind

CHAINED = 16
SIZES = (256, 2**20)


def _scaled(a):
    return a * np.float32(1.0001)


def _scaled_into(a, *, out):
    np.multiply(a, np.float32(1.0001), out=out)


def programs() -> dict[str, Callable]:
    like = lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype)
    returning = xlabind.callback(_scaled, like)
    in_place = xlabind.callback(_scaled_into, like, in_place=True)
    return {
        "jax.pure_callback": chained(lambda x: jax.pure_callback(_scaled, like(x), x), CHAINED),
        "xlabind.callback": chained(returning, CHAINED),
        "xlabind.callback in_place": chained(in_place, CHAINED),
    }


ROUND_TRIP = "np.asarray + device_put, outside a program"


def _round_trip(x):
    return jax.device_put(np.asarray(x), x.devices().pop())


def rows(rounds: int = 15) -> Iterator[dict]:
    """One row per size and case, with its ratio to jax.pure_callback."""
    cases = programs()
    for n in SIZES:
        x = jnp.linspace(0.0, 1.0, n, dtype=jnp.float32)
        expected = np.asarray(x) * np.float32(1.0001) ** CHAINED
        for name, program in cases.items():
            np.testing.assert_allclose(program(x), expected, rtol=1e-5, err_msg=name)
        ms = interleaved_medians({**cases, ROUND_TRIP: _round_trip}, (x,), rounds, seed=n)
        failures = [f"{name}: {m}" for name, m in ms.items() if isinstance(m, str)]
        if failures:
            raise RuntimeError("; ".join(failures))
        base = ms["jax.pure_callback"]
        for name, median in ms.items():
            assert isinstance(median, float)
            program_ms = median if name == ROUND_TRIP else median / CHAINED
            ratio = float("nan") if name == ROUND_TRIP else median / base
            yield {"n": n, "case": name, "ms_per_call": program_ms, "ratio": ratio}


def table_lines(rounds: int = 15) -> Iterator[str]:
    yield from markdown_table(
        ["n (float32)", f"case ({CHAINED} chained)", "ms a call", "vs pure_callback"],
        (
            [
                row["n"],
                row["case"],
                f"{row['ms_per_call']:.3f}",
                "" if row["ratio"] != row["ratio"] else f"{row['ratio']:.2f}x",
            ]
            for row in rows(rounds)
        ),
    )
