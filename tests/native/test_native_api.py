"""xlabind's native API beyond one stateless execute function, one capability
at a time (tests/native/native_api_handlers.cc): state built once per executable by
an instantiate stage, structured attributes, XLA's thread pool, scratch
memory, the command-buffer trait, and how state types are registered."""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
)

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import native_api_ops
import numpy as np
import pytest

import xlabind
from xlabind import _xlabind
from xlabind._runtime import extension as _extension

jax.config.update("jax_enable_x64", True)

xlabind.register_ffi_targets(native_api_ops)

CONFIG = {"offset": 1.0, "nested": {"scale": 2.0}}


def counter_shapes(x, **_):
    return x, jax.ShapeDtypeStruct((), jnp.int64)


counter = xlabind.callback(xlabind.ffi_target("native_api_counter"), counter_shapes, name="counter")


def test_the_module_hands_out_stages_and_state_types():
    cpu = native_api_ops.registrations()["cpu"]
    assert set(cpu["native_api_counter"]) == {"instantiate", "execute"}
    # Only the module's own targets; the status variants come apart, and keep the stages.
    assert sorted(cpu) == [
        "native_api_counter",
        "native_api_cuda_gather_bodies",
        "native_api_cuda_scatter_bodies",
        "native_api_pool",
        "native_api_scale",
        "native_api_scratch",
        "native_api_ticket",
    ]
    variants = native_api_ops.status_registrations()["cpu"]
    assert sorted(variants) == [name + ".xlabind_status" for name in sorted(cpu)]
    assert set(variants["native_api_counter.xlabind_status"]) == {"instantiate", "execute"}
    assert "CUDA" not in native_api_ops.status_registrations()
    assert not isinstance(cpu["native_api_scale"], dict)  # execute only: a capsule, as before
    assert list(native_api_ops.state_types()) == ["cpu"]
    ((name, registration),) = native_api_ops.state_types()["cpu"].items()
    assert name == "native_api_ops.NativeApiCounter"
    assert set(registration) == {"type_id", "type_info"}


def test_state_is_built_once_per_executable_not_per_call():
    x = jnp.arange(4.0)
    f = jax.jit(lambda x: counter(x, config=CONFIG))
    runs = [f(x) for _ in range(3)]
    for y, _ in runs:
        np.testing.assert_allclose(y, 2.0 * np.arange(4.0) + 1.0)
    serials = {int(serial) for _, serial in runs}
    assert len(serials) == 1, serials  # three runs, one state

    # A loop calls one call site ten times: still one state.
    def loop(x):
        def body(carry, _):
            y, serial = counter(carry, config=CONFIG)
            return y, serial

        return jax.lax.scan(body, x, None, length=10)

    y, loop_serials = jax.jit(loop)(x)
    assert len(set(np.asarray(loop_serials).tolist())) == 1
    assert int(loop_serials[0]) > serials.pop()  # a new executable: a new state
    np.testing.assert_allclose(y, 2.0**10 * np.arange(4.0) + (2.0**10 - 1))  # y <- 2y + 1, 10x


def test_two_call_sites_have_two_states():
    _, a = jax.jit(lambda x: counter(x, config=CONFIG))(jnp.ones(2))
    both = jax.jit(lambda x: (counter(x, config=CONFIG)[1], counter(2 * x, config=CONFIG)[1]))
    s1, s2 = both(jnp.ones(2))
    assert abs(int(s1) - int(s2)) == 1 and min(int(s1), int(s2)) > int(a)


def test_nested_attributes_reach_the_instantiate_stage():
    y, _ = jax.jit(lambda x: counter(x, config={"offset": -3.0, "nested": {"scale": 0.5}}))(
        jnp.arange(3.0)
    )
    np.testing.assert_allclose(y, 0.5 * np.arange(3.0) - 3.0)


def test_a_missing_field_is_an_error_naming_the_op_and_the_field():
    with pytest.raises(
        Exception,
        match=r"native_api_counter: the attribute has no field "
        r"'nested' \(reading 'nested.scale'\)",
    ):
        jax.jit(lambda x: counter(x, config={"offset": 1.0}))(jnp.ones(2))
    with pytest.raises(Exception, match=r"native_api_counter: field 'scale' has the wrong type"):
        jax.jit(lambda x: counter(x, config={"offset": 1.0, "nested": {"scale": "big"}}))(
            jnp.ones(2)
        )


def test_dict_attributes_are_checked_in_python():
    with pytest.raises(
        TypeError,
        match=r"keyword argument 'config' is a dict with the key 1; "
        r"an FFI dictionary attribute's keys are strings",
    ):
        xlabind.ffi_target("native_api_counter", config={1: 2.0})
    with pytest.raises(
        TypeError,
        match=r"keyword argument 'config.nested' must be hashable to "
        r"serve as a static argument, got unhashable set",
    ):
        jax.jit(lambda x: counter(x, config={"offset": 1.0, "nested": {1, 2}}))(jnp.ones(2))


def test_a_dict_reaches_a_python_callback_read_only_and_is_a_static_argument():
    seen = []

    def scaled(x, options):
        seen.append(options)
        return x * options["nested"]["scale"]

    op = xlabind.callback(scaled, lambda x, **_: x)
    options = {"nested": {"scale": 3.0}}
    g = jax.jit(lambda x: op(x, options=options))
    np.testing.assert_allclose(g(jnp.ones(2)), [3.0, 3.0])
    options["nested"]["scale"] = 5.0  # the traced call keeps the dict it was given
    np.testing.assert_allclose(g(jnp.ones(2)), [3.0, 3.0])
    with pytest.raises(TypeError):
        seen[-1]["nested"]["scale"] = 1.0  # read-only
    assert dict(seen[-1]["nested"]) == {"scale": 3.0}


def test_parallel_loops_run_on_xlas_pool():
    pool = xlabind.callback(
        xlabind.ffi_target("native_api_pool"),
        lambda x, **_: (x, jax.ShapeDtypeStruct((2,), jnp.int64)),
    )
    x = jnp.arange(1 << 16, dtype=jnp.float64)
    y, (threads, shares) = jax.jit(lambda x: pool(x, grain=1024))(x)
    np.testing.assert_array_equal(y, 2.0 * np.arange(1 << 16))
    assert threads >= 1  # XLA's intra-op pool answers
    assert shares == min(64, threads, os.cpu_count())  # no more shares than cores
    _, (_, shares) = jax.jit(lambda x: pool(x, grain=1 << 20))(x)
    assert shares == 1  # too little work to split


def test_eight_devices_share_one_small_pool():
    # Every device's call schedules tasks on one pool. XLA's CPU client sizes
    # it max(cores, devices): in a process held to 2 cores, 8 threads for 8
    # devices' calls at once, each also working itself. (A call that waited
    # for its queued tasks could wait for ever if XLA ran calls on that pool;
    # jax 0.9-0.12 run them elsewhere, so this checks results and the deadline
    # rather than that hang.)
    code = textwrap.dedent("""
        import os
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
        import jax, jax.numpy as jnp, numpy as np
        from jax.sharding import Mesh, PartitionSpec as P
        import native_api_ops, xlabind
        jax.config.update("jax_enable_x64", True)
        xlabind.register_ffi_targets(native_api_ops)
        pool = xlabind.callback(xlabind.ffi_target("native_api_pool"),
                                lambda x, **_: (x, jax.ShapeDtypeStruct((2,), jnp.int64)))
        mesh = Mesh(np.array(jax.devices()), ("d",))
        f = jax.jit(jax.shard_map(lambda x: pool(x, grain=256), mesh=mesh, in_specs=P("d"),
                                  out_specs=(P("d"), P("d"))))
        x = jnp.arange(8 << 15, dtype=jnp.float64)
        for _ in range(5):
            y, counts = f(x)
            np.testing.assert_array_equal(y, 2.0 * np.arange(8 << 15))
        print(sorted(set(np.asarray(counts).reshape(8, 2)[:, 0].tolist())))
    """)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    threads = eval(done.stdout.strip().splitlines()[-1])  # the pool's size, as each device saw it
    assert len(threads) == 1 and 1 <= threads[0] <= 8, threads


def test_scratch_memory_and_a_request_that_cannot_be_met():
    scratch = xlabind.callback(xlabind.ffi_target("native_api_scratch"), lambda x, **_: x)
    np.testing.assert_array_equal(scratch(jnp.arange(5.0), extra=0), np.arange(5.0)[::-1])
    with pytest.raises(
        Exception,
        match=r"native_api_scratch: scratch memory for "
        r"4611686018427387904 values of 8 bytes overflows",
    ):
        scratch(jnp.arange(5.0), extra=1 << 62).block_until_ready()


def test_command_buffer_trait_is_set_by_the_macro_and_on_python_handlers_only_when_asked():
    cuda = native_api_ops.registrations()["CUDA"]
    assert _extension.handler_metadata(cuda["native_api_nothing_cb"])["traits"] == 1
    assert _extension.handler_metadata(cuda["native_api_nothing"])["traits"] == 0
    # Python callbacks: only the target of command_buffer_compatible functions.
    for platform in _xlabind.callback_registrations().values():
        for name, stages in platform["targets"].items():
            expected = int(name == _extension.PYTHON_CALLBACK_GRAPH_TARGET)
            assert _extension.handler_metadata(stages["execute"])["traits"] == expected, name
    # xlabind's own: the CUDA copy (one cuMemcpyAsync) is capturable.
    for platform, targets in _xlabind.registrations().items():
        for name, capsule in targets.items():
            expected = int((platform, name) == ("CUDA", "xlabind_cuda_copy"))
            assert _extension.handler_metadata(capsule)["traits"] == expected, name


def test_a_handler_that_refuses_the_metadata_query_is_an_error_not_a_crash():
    # Before its state type is registered, XLA refuses an instantiate stage;
    # here a fresh type id (never registered) stands for that.
    code = textwrap.dedent("""
        import native_api_ops
        from xlabind._runtime import extension as _extension
        stages = native_api_ops.registrations()["cpu"]["native_api_counter"]
        try:
            _extension.handler_metadata(stages["instantiate"])
        except RuntimeError as error:
            print(error)
        else:
            print("no error")
    """)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
    )
    assert "must be registered" in done.stdout, done.stdout + done.stderr[-2000:]


def test_state_types_wait_for_a_backend_that_does_not_exist_yet():
    # In a fresh process, before any backend starts: a CUDA target with a state
    # type is kept until xlabind first lowers for CUDA, then registered after
    # its type (XLA reads a handler's state type when it registers it).
    code = textwrap.dedent("""
        import jax, jax.numpy as jnp, xlabind
        from xlabind._runtime import extension as _extension
        import native_api_ops
        cpu = native_api_ops.registrations()["cpu"]
        types = native_api_ops.state_types()["cpu"]
        xlabind.register_ffi_targets(
            {"cuda": {"fake_stateful": cpu["native_api_counter"]}},
            state_types={"cuda": {"fake_type": next(iter(types.values()))}})
        assert [t for t, _ in _extension._PENDING["cuda"]] == [{"fake_type":
            next(iter(types.values()))}], _extension._PENDING
        op = xlabind.callback(lambda x: x, lambda x: x, platforms=("cpu", "cuda"))
        jax.jit(op).trace(jnp.ones(2)).lower(lowering_platforms=("cuda",))
        assert "cuda" not in _extension._PENDING, _extension._PENDING
        print("ok")
    """)
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
