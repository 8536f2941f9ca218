"""A callback that calls jax itself, while the program that called it is still
running, under asynchronous CPU dispatch.

What works (and these tests keep working): nested jax calls from callbacks of
single-device programs, dispatched asynchronously in a loop, made in place
or inside the traced function; and from callbacks of multi-device programs
once jax dispatches CPU programs synchronously
(``jax_cpu_enable_async_dispatch=False``, set before jax starts its CPU
backend). What does not, and why (docs/semantics.md, "Threads"): from the callbacks of a
program with at least as many devices as XLA's CPU client has threads under
asynchronous dispatch, a nested computation finds no thread to run on;
jax's own callbacks run nested computations inline through a jaxlib-internal
mark that a third-party FFI handler cannot set.
"""

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np

import xlabind

_NESTED = jax.jit(lambda y: jnp.sin(y) @ jnp.cos(y).T)


def _calls_jax(x):
    y = np.array(x)
    return np.asarray(_NESTED(y)).sum(axis=1, keepdims=True) + y


def _in_numpy(y):
    return (np.sin(y) @ np.cos(y).T).sum(axis=1, keepdims=True) + y


def test_nested_jax_calls_from_a_single_device_program_under_async_dispatch():
    op = xlabind.callback(_calls_jax, lambda x: x)
    heavy = jax.jit(lambda x: jnp.tanh(x @ x) @ x)
    f = jax.jit(lambda x: op(op(x) * 2) + 1)
    x = jnp.full((64, 64), 0.01)
    # Each input still being computed when the next call is queued.
    outs = [f(heavy(x)) for _ in range(10)]
    h = np.asarray(heavy(x))
    want = _in_numpy(_in_numpy(h) * 2) + 1
    for out in outs:
        np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5)
    made_inside = jax.jit(lambda x: xlabind.callback(_calls_jax, lambda x: x)(x))
    np.testing.assert_allclose(np.asarray(made_inside(x)), _in_numpy(np.asarray(x)), rtol=1e-5)


def test_nested_jax_calls_from_8_device_programs_with_synchronous_dispatch():
    # A fresh process: the setting must come before jax starts its CPU backend.
    script = textwrap.dedent("""
        import os
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
        import jax
        jax.config.update("jax_cpu_enable_async_dispatch", False)
        import jax.numpy as jnp, numpy as np, xlabind
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        nested = jax.jit(lambda y: jnp.sin(y) @ jnp.cos(y).T)
        def calls_jax(x):
            y = np.array(x)
            return np.asarray(nested(y)).sum(axis=1, keepdims=True) + y
        mesh = Mesh(np.array(jax.devices()), ("d",))
        x = jax.device_put(jnp.full((64, 64), 0.01), NamedSharding(mesh, P("d")))
        for rule in ("r c -> r c", None):
            op = xlabind.callback(calls_jax, lambda x: x, sharding_rule=rule)
            f = jax.jit(lambda x: op(op(x) * 2) + 1)
            outs = [f(x) for _ in range(10)]
            for out in outs:
                np.testing.assert_allclose(np.asarray(out), np.asarray(outs[0]))
        sm = jax.jit(jax.shard_map(lambda x: jax.lax.psum(op(x), "d"), mesh=mesh,
                                   in_specs=P("d"), out_specs=P()))
        [sm(x) for _ in range(10)][-1].block_until_ready()
        print("ok")
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
