"""Whatever can still call a function keeps it alive, and nothing else does:
a compiled executable (through its handler's instantiate state, also while a
run is in flight), a traced program (through its jaxpr), and the bound
function itself (its registry entries). When they are gone, so is the
user's function."""

import gc
import os
import subprocess
import sys
import threading
import weakref

import gc_stages
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xlabind
from xlabind import _xlabind
from xlabind._runtime import extension as _extension


def test_compiled_executable_outlives_every_user_reference():
    def triple(x):
        return x * 3

    compiled = jax.jit(xlabind.callback(triple, lambda x: x)).lower(jnp.ones(3)).compile()
    del triple  # the user's function, the Callback and the jitted function are all gone
    gc.collect()
    np.testing.assert_array_equal(compiled(jnp.ones(3)), [3.0, 3.0, 3.0])


def test_jitted_function_keeps_working_after_the_user_function_is_deleted():
    def add_one(x):
        return x + 1

    jitted = jax.jit(xlabind.callback(add_one, lambda x: x))
    np.testing.assert_array_equal(jitted(jnp.zeros(2)), [1.0, 1.0])
    del add_one
    gc.collect()
    np.testing.assert_array_equal(jitted(jnp.zeros(2)), [1.0, 1.0])


def _settled_data_count() -> int:
    """Live callback data once garbage and data released without the GIL are gone."""
    gc.collect()
    _extension.collect_released_callbacks()
    return _extension.live_callback_data_count()


def test_callbacks_are_released_with_their_executables():
    jax.clear_caches()
    before = _settled_data_count()
    compiled = [
        jax.jit(xlabind.callback(lambda x, i=i: x + i, lambda x: x)).lower(jnp.ones(2)).compile()
        for i in range(5)
    ]
    jax.clear_caches()
    # Every bound function and program is gone: the executables hold their data.
    assert _settled_data_count() == before + 5
    np.testing.assert_array_equal(compiled[4](jnp.zeros(2)), [4.0, 4.0])
    del compiled
    assert _settled_data_count() == before


def test_registry_keys_are_distinct_and_not_addresses():
    entries = [_extension.CallbackEntry(lambda o, r: None, f"e{i}") for i in range(100)]
    keys = {e.key for e in entries}
    assert len(keys) == 100
    assert all(k not in {id(e) for e in entries} for k in keys)
    assert all(0 <= k < 2**63 for k in keys)


def test_a_preferred_key_is_taken_when_free_else_the_next_free_one():
    preferred = 12345678901234567
    first = _extension.CallbackEntry(lambda o, r: None, "a", preferred_key=preferred)
    second = _extension.CallbackEntry(lambda o, r: None, "b", preferred_key=preferred)
    assert (first.key, second.key) == (preferred, preferred + 1)
    assert _xlabind.registered_name(second.key) == "b"
    del first
    gc.collect()
    third = _extension.CallbackEntry(lambda o, r: None, "c", preferred_key=preferred)
    assert third.key == preferred and _xlabind.registered_name(preferred) == "c"
    # Keys stay below 2^62 (MLIR's u64 attributes are signed underneath).
    top = _extension.CallbackEntry(lambda o, r: None, "d", preferred_key=2**62 - 1)
    past = _extension.CallbackEntry(lambda o, r: None, "e", preferred_key=2**62 - 1)
    assert top.key == 2**62 - 1 and 0 < past.key < 2**62


def test_programs_of_one_function_name_it_alike_in_every_process():
    script = (
        "import jax, jax.numpy as jnp, numpy as np, xlabind\n"
        "f = xlabind.callback(np.cos, lambda x: x, name='cosine')\n"
        "print(jax.jit(lambda x: f(x) * 2).lower(jnp.ones(3)).as_text())\n"
    )
    texts = [
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "JAX_PLATFORMS": "cpu"},
        ).stdout
        for _ in range(2)
    ]
    assert "callback_key" in texts[0] and texts[0] == texts[1]


def _count_alive(refs) -> int:
    gc.collect()
    return sum(ref() is not None for ref in refs)


def test_jitted_callbacks_are_freed_when_dropped_without_clear_caches():
    # The guides' own pattern: jax.jit(xlabind.callback(...)), called once, dropped.
    refs = []
    before = _extension.live_callback_count()
    for i in range(200):

        def add(x, i=i):
            return x + i

        refs.append(weakref.ref(add))
        jax.jit(xlabind.callback(add, lambda x: x))(jnp.ones(3)).block_until_ready()
        del add
    assert _count_alive(refs) <= 5
    assert _extension.live_callback_count() <= before + 5


def test_eager_calls_do_not_keep_functions_alive():
    refs = []
    for i in range(50):

        def sub(x, i=i):
            return x - i

        refs.append(weakref.ref(sub))
        np.testing.assert_array_equal(xlabind.callback(sub, lambda x: x)(jnp.zeros(2)), [-i, -i])
        del sub
    assert _count_alive(refs) <= 1


def test_differentiated_and_vmapped_functions_are_freed_too():
    refs = []
    for i in range(30):

        def scale(x, i=i):
            return x * (i + 1)

        refs.append(weakref.ref(scale))
        op = xlabind.linear(scale, scale, lambda x: x)
        jax.jit(jax.grad(lambda x, op=op: op(x).sum()))(jnp.ones(3)).block_until_ready()
        jax.jit(jax.vmap(op))(jnp.ones((2, 3))).block_until_ready()
        op(jnp.ones(3)).block_until_ready()
        del scale, op
    assert _count_alive(refs) <= 1


def test_entries_for_many_static_kwargs_live_with_their_bound_function():
    op = xlabind.callback(lambda x, *, k: x + k, lambda x, **_: x)
    gc.collect()
    before = _extension.live_callback_count()
    jitted = jax.jit(lambda x, k: op(x, k=k), static_argnums=1)
    for k in range(40):
        jitted(jnp.zeros(2), k).block_until_ready()
    assert _extension.live_callback_count() == before + 40
    del jitted
    gc.collect()
    # The bound function holds its entries: each call signature keeps its key,
    # so programs lowered again compile to the same executable.
    assert _extension.live_callback_count() == before + 40
    np.testing.assert_array_equal(jax.jit(lambda x: op(x, k=1))(jnp.zeros(2)), [1.0, 1.0])
    op = None  # the last reference to the bound function
    gc.collect()
    assert _extension.live_callback_count() == before


def test_a_traced_program_outlives_its_bound_function():
    op = xlabind.callback(lambda x: 2 * x, lambda x: x, name="gone")
    traced = jax.jit(op).trace(jnp.ones(2))
    del op
    gc.collect()
    lowered = traced.lower()
    gc.collect()
    compiled = lowered.compile()
    del traced, lowered
    gc.collect()
    np.testing.assert_array_equal(compiled(jnp.ones(2)), [2.0, 2.0])


def _heavy(x):
    # Enough work that the dispatched computation is still queued when the
    # Python objects of the call are dropped.
    for _ in range(3):
        x = jnp.tanh(x @ x)
    return x


@pytest.mark.parametrize("run", range(3))
def test_a_live_function_runs_under_asynchronous_dispatch(run):
    op = xlabind.callback(lambda x: np.asarray(x) * 2, lambda x: x)
    x = jnp.full((600, 600), 0.001)
    y = jax.jit(lambda x: op(_heavy(x)) + 1)(x)  # the jitted lambda is dropped at once
    gc.collect()
    np.testing.assert_allclose(np.asarray(y), 2 * np.asarray(_heavy(x)) + 1, rtol=1e-5)


@pytest.mark.parametrize("run", range(3))
def test_a_function_made_inside_the_traced_function_runs(run):
    def make_op():
        return xlabind.callback(lambda x: np.asarray(x) * 3, lambda x: x)

    x = jnp.full((600, 600), 0.001)
    y = jax.jit(lambda x: make_op()(_heavy(x)))(x)
    gc.collect()
    np.testing.assert_allclose(np.asarray(y), 3 * np.asarray(_heavy(x)), rtol=1e-5)
    # Each stage with a collection in between: trace, lower, compile, run.
    out = gc_stages.run_in_stages([jax.jit(lambda x: make_op()(x) + 1)], jnp.ones(3))
    np.testing.assert_array_equal(out, [4.0, 4.0, 4.0])


def test_executables_dropped_on_another_thread_free_their_functions():
    before = _settled_data_count()
    done = threading.Event()

    def work():
        for i in range(5):
            jax.jit(xlabind.callback(lambda x, i=i: x + i, lambda x: x))(
                jnp.ones(2)
            ).block_until_ready()
        done.set()

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert done.is_set()
    assert _settled_data_count() == before
