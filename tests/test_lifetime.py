"""A compiled executable keeps its callback alive; nothing else keeps it forever:
when the bound function and its executables are gone, so is the user's function."""

import gc
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xlabind
from xlabind import _extension


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


def test_callbacks_are_released_with_their_executables():
    jax.clear_caches()
    gc.collect()
    before = _extension.live_callback_count()
    compiled = [jax.jit(xlabind.callback(lambda x, i=i: x + i, lambda x: x))
                .lower(jnp.ones(2)).compile() for i in range(5)]
    assert _extension.live_callback_count() == before + 5
    np.testing.assert_array_equal(compiled[4](jnp.zeros(2)), [4.0, 4.0])
    del compiled
    jax.clear_caches()
    gc.collect()
    assert _extension.live_callback_count() == before


def test_registry_keys_are_distinct_and_not_addresses():
    entries = [_extension.CallbackEntry(lambda o, r: None, f"e{i}") for i in range(100)]
    keys = {e.key for e in entries}
    assert len(keys) == 100
    assert all(k not in {id(e) for e in entries} for k in keys)
    assert all(0 <= k < 2**63 for k in keys)


def _count_alive(refs) -> int:
    gc.collect()
    return sum(ref() is not None for ref in refs)


def test_jitted_callbacks_are_freed_when_dropped_without_clear_caches():
    # The README's own pattern: jax.jit(xlabind.callback(...)), called once, dropped.
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
        jax.jit(jax.grad(lambda x: op(x).sum()))(jnp.ones(3)).block_until_ready()
        jax.jit(jax.vmap(op))(jnp.ones((2, 3))).block_until_ready()
        op(jnp.ones(3)).block_until_ready()
        del scale, op
    assert _count_alive(refs) <= 1


def test_entries_for_many_static_kwargs_die_with_their_executables():
    op = xlabind.callback(lambda x, *, k: x + k, lambda x, **_: x)
    before = _extension.live_callback_count()
    jitted = jax.jit(lambda x, k: op(x, k=k), static_argnums=1)
    for k in range(40):
        jitted(jnp.zeros(2), k).block_until_ready()
    assert _extension.live_callback_count() >= before + 40
    del jitted
    gc.collect()
    # The bound function is alive; the entries of executables that died are not.
    assert _extension.live_callback_count() == before
    np.testing.assert_array_equal(jax.jit(lambda x: op(x, k=1))(jnp.zeros(2)), [1.0, 1.0])


def test_a_traced_program_outliving_its_function_says_so():
    op = xlabind.callback(lambda x: x, lambda x: x, name="gone")
    traced = jax.jit(op).trace(jnp.ones(2))
    del op
    gc.collect()
    with pytest.raises(ReferenceError, match=r"'gone' was garbage-collected while a traced "
                                             r"program still refers to it"):
        traced.lower()
