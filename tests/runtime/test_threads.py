"""Calls from several Python threads at once, eager and jitted."""

import threading
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np
from cuda_host_calls import host_calls

import xlabind


def test_concurrent_calls_from_many_threads():
    lock = threading.Lock()
    callers = set()

    def work(x, *, offset):
        with lock:
            callers.add(threading.get_ident())
        return np.sort(x)[::-1] + offset

    op = xlabind.callback(work, lambda x, **_: x)
    jitted = jax.jit(lambda x, offset: op(x, offset=offset), static_argnums=1)

    def one(i):
        x = jnp.arange(i, i + 100, dtype=jnp.float32)
        f = jitted if i % 2 else (lambda x, o: op(x, offset=o))
        y = np.asarray(f(x, i % 3))
        np.testing.assert_array_equal(y, np.arange(i, i + 100, dtype=np.float32)[::-1] + i % 3)
        return i

    with ThreadPoolExecutor(max_workers=8) as pool:
        done = sorted(pool.map(one, range(200)))
    assert done == list(range(200))
    assert callers  # the callback ran, on whichever threads XLA chose


def test_threads_mixing_failures_and_successes():
    def maybe_fail(x):
        if x[0] < 0:
            raise ValueError("negative")
        return x

    op = jax.jit(xlabind.callback(maybe_fail, lambda x: x))

    def one(i):
        sign = -1.0 if i % 4 == 0 else 1.0
        try:
            return float(op(jnp.full(3, sign * (i + 1)))[0])
        except Exception as e:
            assert "ValueError: negative" in str(e)
            return None

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(one, range(60)))
    assert [r is None for r in results] == [i % 4 == 0 for i in range(60)]
    assert all(r == i + 1 for i, r in enumerate(results) if r is not None)


# -- threads Python did not start (XLA's worker threads) ----------------------
# The CUDA handler's host path, timed without a GPU, runs its calls on a new
# std::thread when asked: the thread state the handler gives such a thread.


def _counting():
    """fn(operands, results) counting its calls in a threading.local, and the
    (thread, count) of each call."""
    local = threading.local()
    seen = []

    def count(operands, results):
        local.calls = getattr(local, "calls", 0) + 1
        seen.append((threading.get_ident(), local.calls))

    return count, seen


def test_a_foreign_thread_keeps_its_thread_state_between_calls():
    count, seen = _counting()
    host_calls(count, calls=3, foreign_thread=True)
    assert len({ident for ident, _ in seen}) == 1 and seen[0][0] != threading.get_ident()
    # One thread state for the thread's life: its threading.local lives on.
    assert [n for _, n in seen] == [1, 2, 3], seen


def test_calls_keep_working_as_such_threads_come_and_go():
    # Each new thread gets a thread state of its own at its first call (kept
    # when the thread ends: the interpreter frees it at exit); the calls on
    # the next threads, and on Python's, are unaffected.
    count, seen = _counting()
    for _ in range(50):
        host_calls(count, calls=2, foreign_thread=True)
    assert [n for _, n in seen] == [1, 2] * 50
    op = xlabind.callback(lambda x: x + 1, lambda x: x)
    np.testing.assert_array_equal(jax.jit(op)(jnp.zeros(3)), np.ones(3))
