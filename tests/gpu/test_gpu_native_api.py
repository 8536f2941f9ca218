"""A user's native ops on a real GPU: examples/native_op's module, built by
Bazel and put on the path there by tools/device_check.py (--modules). The table op's
CUDA state (a table in device memory, built once per executable), its
scratch memory from XLA's allocator, and its JVP kernel, which is marked
command-buffer compatible; the values against the CPU handlers'. Skipped
without a CUDA device, and where that module was not built (Bazel runs
examples/native_op's own tests on the CPU instead)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gpu_devices import has_gpu, on_cpu, on_gpu, requires_gpu

import xlabind

pytestmark = requires_gpu

example_ops = (
    pytest.importorskip(
        "example_ops", reason="examples/native_op's module: tools/device_check.py --modules DIR"
    )
    if has_gpu()
    else None
)

if example_ops is not None:
    xlabind.register_ffi_targets(example_ops)
    TABLE_JVP = xlabind.ffi_target("example_table_jvp", platforms=("cpu", "cuda"))
    table = xlabind.nonlinear(
        xlabind.ffi_target("example_table", platforms=("cpu", "cuda")),
        lambda x, **_: x,
        jvp=TABLE_JVP,
        vjp=TABLE_JVP,
        vmap_method="broadcast_all",
        name="example_table",
    )
    tables_built = xlabind.callback(
        xlabind.ffi_target("example_tables_built"), lambda x: jax.ShapeDtypeStruct((), jnp.int32)
    )

SIN = {"function": "sin", "size": 4097, "range": {"lo": -4.0, "hi": 4.0}}


def test_the_jvp_handler_reports_the_command_buffer_trait():
    handler = example_ops.registrations()["CUDA"]["example_table_jvp"]["execute"]
    assert xlabind._runtime.extension.handler_metadata(handler)["traits"] == 1
    handler = example_ops.registrations()["CUDA"]["example_table"]["execute"]
    assert xlabind._runtime.extension.handler_metadata(handler)["traits"] == 0


def test_values_and_gradients_match_the_cpu_handlers():
    x = np.linspace(-5.0, 5.0, 1 << 20, dtype=np.float32)  # past the range at both ends
    f = jax.jit(lambda x: table(x, table=SIN))
    grad = jax.jit(jax.grad(lambda x: jnp.sum(table(x, table=SIN) ** 2)))
    np.testing.assert_allclose(f(on_gpu(x)), f(on_cpu(x)), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(grad(on_gpu(x)), grad(on_cpu(x)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(f(on_gpu(x)), np.sin(np.clip(x, -4.0, 4.0)), atol=1e-6)


def test_a_device_table_is_built_once_per_executable():
    x = on_gpu(jnp.linspace(-1.0, 1.0, 4096, dtype=jnp.float32))
    f = jax.jit(lambda x: table(x, table={**SIN, "function": "tanh"}))
    count = jax.jit(tables_built)
    before = int(count(on_cpu(np.zeros(1, np.float32))))
    for _ in range(5):
        np.testing.assert_allclose(f(x), np.tanh(np.asarray(x)), atol=1e-6)
    assert int(count(on_cpu(np.zeros(1, np.float32)))) == before + 1


def test_a_bad_table_fails_on_the_gpu_with_the_op_named():
    with pytest.raises(Exception, match=r"example_table: unknown table function 'cos'"):
        jax.jit(lambda x: table(x, table={**SIN, "function": "cos"}))(
            on_gpu(jnp.ones(4, jnp.float32))
        ).block_until_ready()


def test_many_calls_in_one_program_reuse_their_state():
    # A loop body is one call site: one table, and the JVP kernel replayed.
    def loop(x):
        return jax.lax.fori_loop(0, 50, lambda _, y: table(y, table=SIN), x)

    x = np.linspace(-1.0, 1.0, 4096, dtype=np.float32)
    np.testing.assert_allclose(
        jax.jit(loop)(on_gpu(x)), jax.jit(loop)(on_cpu(x)), rtol=1e-5, atol=1e-6
    )
    g = jax.jit(jax.grad(lambda x: jnp.sum(loop(x))))
    np.testing.assert_allclose(g(on_gpu(x)), g(on_cpu(x)), rtol=1e-4, atol=1e-5)
