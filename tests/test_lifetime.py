"""A compiled executable keeps its callback alive; nothing else keeps it forever."""

import gc

import jax
import jax.numpy as jnp
import numpy as np

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
