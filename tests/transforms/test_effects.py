"""effect="unordered" / "ordered": calls that run although their results are
unused, and (ordered) in program order; refused under vmap (ordered), AD and
sharding rules (ordered), with errors that name the function."""

import os
import re
import subprocess
import sys
import textwrap

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
)

import jax
import jax.numpy as jnp
import native_api_ops
import numpy as np
import pytest
from jax import export
from jax.experimental import io_callback
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import xlabind

xlabind.register_ffi_targets(native_api_ops)


def logger(seen, tag, effect, **options):
    def fn(x):
        seen.append(tag)
        return x

    return xlabind.callback(fn, lambda x: x, effect=effect, name=f"log_{tag}", **options)


@pytest.mark.parametrize("effect", ["unordered", "ordered"])
def test_unused_results_still_run_once_per_execution(effect):
    seen = []
    log = logger(seen, "a", effect)
    f = jax.jit(lambda x: (log(x), x + 1)[1])
    np.testing.assert_array_equal(f(jnp.ones(2)), [2.0, 2.0])
    assert seen == ["a"]
    f(jnp.ones(2))
    assert seen == ["a", "a"]


def test_without_an_effect_unused_results_are_removed():
    seen = []
    log = logger(seen, "a", None)
    jax.jit(lambda x: (log(x), x + 1)[1])(jnp.ones(2))
    assert seen == []


def test_lowered_with_has_side_effect():
    for effect, expected in ((None, False), ("unordered", True), ("ordered", True)):
        text = jax.jit(logger([], "a", effect)).lower(jnp.ones(2)).as_text()
        assert ("has_side_effect = true" in text) == expected, effect
    noop = xlabind.callback(xlabind.ffi_target("xlabind_noop"), lambda x: x, effect="unordered")
    assert "has_side_effect = true" in jax.jit(noop).lower(jnp.ones(2)).as_text()


def test_native_target_with_an_effect_runs_with_its_result_unused():
    noop = xlabind.callback(xlabind.ffi_target("xlabind_noop"), lambda x: x, effect="unordered")
    np.testing.assert_array_equal(jax.jit(lambda x: (noop(x), x * 2)[1])(jnp.ones(2)), [2, 2])
    ticket = xlabind.callback(
        xlabind.ffi_target("native_api_ticket", takes_token=True),
        lambda x: (x, jax.ShapeDtypeStruct((), np.int32)),
        effect="ordered",
    )
    before = int(jax.jit(ticket)(jnp.ones(2))[1])
    jax.jit(lambda x: (ticket(x), x * 2)[1])(jnp.ones(2))
    assert int(jax.jit(ticket)(jnp.ones(2))[1]) == before + 2


def test_ordered_calls_run_in_program_order():
    seen = []
    a, b, c = (logger(seen, tag, "ordered") for tag in "abc")
    # No data dependence between the calls: only the effect orders them.
    f = jax.jit(lambda x: (c(x), b(x * 2), a(x + 1), c(x - 1), x)[-1])
    for _ in range(3):
        f(jnp.ones(3))
    assert seen == ["c", "b", "a", "c"] * 3
    # Across separate jitted functions, and eager calls, too.
    seen.clear()
    g = jax.jit(lambda x: (a(x), x)[1])
    h = jax.jit(lambda x: (b(x), x)[1])
    g(jnp.ones(2)), h(jnp.ones(2)), c(jnp.ones(2)), g(jnp.ones(2))
    jax.effects_barrier()
    assert seen == ["a", "b", "c", "a"]


def test_ordered_inside_control_flow():
    seen = []
    a, b = (logger(seen, tag, "ordered") for tag in "ab")

    def body(carry, _):
        return (a(carry), b(carry))[1] + 1, None

    carry, _ = jax.jit(lambda x: jax.lax.scan(body, x, None, length=3))(jnp.zeros(2))
    np.testing.assert_array_equal(carry, [3.0, 3.0])
    assert seen == ["a", "b"] * 3


def test_eager_calls_run():
    seen = []
    logger(seen, "a", "unordered")(jnp.ones(2))
    logger(seen, "b", "ordered")(jnp.ones(2))
    jax.effects_barrier()
    assert seen == ["a", "b"]


def test_unordered_without_results_runs():
    seen = []
    note = xlabind.callback(lambda x: seen.append(float(x.sum())), (), effect="unordered")
    jax.jit(lambda x: (note(x), x)[1])(jnp.ones(3))
    assert seen == [3.0]


def test_ordered_keeps_program_order_against_data_dependencies():
    # XLA:CPU runs a program's operations as their data allow: the second
    # call reads a parameter and could run first. The ordering token is what
    # keeps it after the first.
    seen = []
    log = xlabind.callback(
        lambda x, *, tag: (seen.append(tag), x)[1], lambda x, **_: x, effect="ordered"
    )

    def program(x, y):
        log(jnp.sin(y * 2) @ jnp.cos(y * 3).T, tag="first")
        log(x, tag="second")
        log(y.sum(), tag="third")
        return x

    for _ in range(3):
        jax.jit(program)(jnp.ones(2), jnp.ones((64, 64)))
    jax.effects_barrier()
    assert seen == ["first", "second", "third"] * 3


def test_ordered_shares_io_callbacks_order():
    # One token for both: xlabind's ordered calls and io_callback(ordered=True)
    # interleave in program order.
    seen = []
    log = logger(seen, "xlabind", "ordered")

    def io(x):
        seen.append("io")
        return x

    def program(x):
        io_callback(io, jax.ShapeDtypeStruct(x.shape, x.dtype), jnp.exp(x) * 3, ordered=True)
        log(x)
        io_callback(io, jax.ShapeDtypeStruct((), x.dtype), x.sum(), ordered=True)
        return x

    jax.jit(program)(jnp.ones(2))
    jax.effects_barrier()
    assert seen == ["io", "xlabind", "io"]


def test_ordered_without_arguments_or_results():
    seen = []
    tick = xlabind.callback(lambda: seen.append("tick"), (), effect="ordered")
    note = xlabind.callback(lambda x: seen.append(float(x.sum())), (), effect="ordered")
    jax.jit(lambda x: (tick(), note(x * 2), tick(), x)[-1])(jnp.ones(2))
    jax.effects_barrier()
    assert seen == ["tick", 4.0, "tick"]


def test_ordered_native_target_takes_the_token():
    # native_api_ticket: jax's token in and out, and the order it ran in.
    ticket = xlabind.callback(
        xlabind.ffi_target("native_api_ticket", takes_token=True),
        lambda x: (x, jax.ShapeDtypeStruct((), np.int32)),
        effect="ordered",
    )

    def program(x, y):
        _, first = ticket(jnp.sin(y) @ jnp.cos(y).T)
        _, second = ticket(x)
        return first, second

    first, second = jax.jit(program)(jnp.ones(2), jnp.ones((64, 64)))
    assert int(second) == int(first) + 1
    # Unordered, the same target gets a fresh token of its own.
    free = xlabind.callback(
        xlabind.ffi_target("native_api_ticket", takes_token=True),
        lambda x: (x, jax.ShapeDtypeStruct((), np.int32)),
        effect="unordered",
    )
    np.testing.assert_array_equal(jax.jit(free)(jnp.arange(3.0))[0], [0.0, 1.0, 2.0])


def test_ordered_native_target_without_a_token_is_refused():
    with pytest.raises(
        ValueError,
        match=r"noop: effect='ordered' needs FFI targets that take "
        r"jax's ordering token, and 'xlabind_noop' was not "
        r"declared to.*takes_token=True",
    ):
        xlabind.callback(
            xlabind.ffi_target("xlabind_noop"), lambda x: x, effect="ordered", name="noop"
        )
    with pytest.raises(TypeError, match="takes_token must be a bool"):
        xlabind.ffi_target("xlabind_noop", takes_token="yes")


def test_bad_effect():
    with pytest.raises(
        ValueError,
        match=r"my_op: effect must be one of \(None, 'unordered', "
        r"'ordered'\), got 'always'",
    ):
        xlabind.callback(np.negative, lambda x: x, effect="always", name="my_op")
    assert xlabind.EFFECTS == (None, "unordered", "ordered")
    assert xlabind.callback(np.negative, lambda x: x, effect="ordered").effect == "ordered"


# -- vmap ----------------------------------------------------------------------


@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all"])
def test_unordered_under_vmap(method):
    seen = []
    log = logger(seen, "a", "unordered", vmap_method=method)
    xs = jnp.arange(6.0).reshape(3, 2)
    jax.jit(jax.vmap(lambda x: (log(x), x + 1)[1]))(xs)
    assert seen == ["a"] * (3 if method == "sequential" else 1)


def test_unordered_refuses_vmap_of_cond_with_a_batched_predicate():
    # The branch not taken would run its effect: jax refuses it, as for io_callback.
    seen = []
    log = logger(seen, "a", "unordered", vmap_method="expand_dims")

    def f(p, x):
        return jax.lax.cond(p, log, jnp.negative, x)

    with pytest.raises(NotImplementedError, match="IO effect not supported in vmap-of-cond"):
        jax.vmap(f)(jnp.array([True, False]), jnp.ones((2, 3)))
    with pytest.raises(NotImplementedError, match="IO effect not supported in vmap-of-cond"):
        jax.jit(jax.vmap(f))(jnp.array([True, False]), jnp.ones((2, 3)))
    assert seen == []


def test_unordered_refuses_vmap_of_while_with_a_batched_predicate():
    seen = []
    log = logger(seen, "a", "unordered")

    def f(n):
        return jax.lax.while_loop(
            lambda c: c[0] < n, lambda c: (c[0] + 1, log(c[1] + 1.0)), (0, 0.0)
        )[1]

    with pytest.raises(
        Exception, match="Unordered IO effects not supported in while_loop with batched predicate"
    ):
        jax.vmap(f)(jnp.array([1, 3]))
    assert seen == []
    # The loop runs as often for every element: fine.
    np.testing.assert_array_equal(
        jax.vmap(lambda x: jax.lax.fori_loop(0, 2, lambda i, c: log(c) + 1, x))(jnp.zeros(3)),
        [2.0, 2.0, 2.0],
    )
    assert seen == ["a"] * 2 * 3


def test_ordered_refuses_vmap():
    log = logger([], "a", "ordered", vmap_method="expand_dims")
    with pytest.raises(
        ValueError, match="log_a has effect='ordered', so it cannot be batched with jax.vmap"
    ):
        jax.vmap(log)(jnp.ones((3, 2)))


# -- derivatives ---------------------------------------------------------------


@pytest.mark.parametrize("effect", ["unordered", "ordered"])
def test_derivatives_are_refused_before_anything_runs(effect):
    # As io_callback: jax.grad refuses while it traces, eagerly too.
    seen = []
    scale = xlabind.linear(
        lambda x: (seen.append("f"), 2 * x)[1],
        lambda ct: 2 * ct,
        lambda x: x,
        effect=effect,
        name="scale",
    )
    with pytest.raises(
        TypeError,
        match=f"scale has effect='{effect}', so it cannot be "
        f"differentiated: its derivatives would run the effect "
        f"again",
    ):
        jax.grad(lambda x: scale(x).sum())(jnp.ones(2))
    for transform in (jax.grad, lambda f: jax.jit(jax.grad(f))):
        with pytest.raises(TypeError, match="scale has effect=.*cannot be differentiated"):
            transform(lambda x: scale(x).sum())(jnp.ones(2))
    with pytest.raises(TypeError, match="scale has effect=.*cannot be differentiated"):
        jax.jvp(scale, (jnp.ones(2),), (jnp.ones(2),))
    with pytest.raises(TypeError, match="scale has effect=.*cannot be differentiated"):
        jax.linearize(scale, jnp.ones(2))
    with pytest.raises(TypeError, match="scale has effect=.*cannot be transposed"):
        jax.linear_transpose(scale, jnp.ones(2))(jnp.ones(2))
    square = xlabind.nonlinear(
        lambda x: x * x, lambda x: x, jvp=lambda x, t: 2 * x * t, effect=effect, name="square"
    )
    with pytest.raises(TypeError, match="square has effect=.*cannot be differentiated"):
        jax.jacfwd(square)(jnp.ones(2))
    jax.effects_barrier()
    assert seen == []


def test_effectful_call_with_no_tangent_under_grad():
    # Its argument does not depend on what is differentiated: no derivative
    # of it is needed, so the call runs, once.
    seen = []
    log = logger(seen, "a", "unordered")
    grad = jax.grad(lambda x, y: (x * log(y)).sum())(jnp.ones(2), jnp.full(2, 3.0))
    np.testing.assert_array_equal(grad, [3.0, 3.0])
    assert seen == ["a"]


# -- sharding ------------------------------------------------------------------


@pytest.fixture(scope="module")
def mesh():
    assert len(jax.devices()) == 4, "XLA_FLAGS must be set before jax is imported"
    return Mesh(np.array(jax.devices()), ("d",))


def test_ordered_over_several_devices_runs_once_in_order(mesh):
    # As io_callback(ordered=True): once per program, on whole arrays, in
    # program order with the io_callbacks, whatever the program's sharding.
    seen = []
    log = xlabind.callback(
        lambda x: (seen.append(float(np.asarray(x).sum())), x)[1],
        lambda x: x,
        effect="ordered",
        name="log",
    )

    def io(x):
        seen.append("io")
        return x

    def program(x):
        a = log(jnp.sin(x) * 0 + x * 2)
        io_callback(io, jax.ShapeDtypeStruct((), x.dtype), x.sum(), ordered=True)
        b = log(x)
        return a + b

    explicit = jax.make_mesh((4,), ("e",), axis_types=(jax.sharding.AxisType.Explicit,))
    for m, spec in ((mesh, P("d")), (explicit, P("e"))):
        seen.clear()
        x = jax.device_put(jnp.arange(8.0), NamedSharding(m, spec))
        y = jax.jit(program)(x)
        jax.effects_barrier()
        np.testing.assert_array_equal(y, 3 * np.arange(8.0))
        assert seen == [56.0, "io", 28.0]
        # Results unused: still once each.
        seen.clear()
        jax.jit(lambda x: (log(x), log(x * 2), x + 1)[-1])(x)
        jax.effects_barrier()
        assert seen == [28.0, 56.0]


def test_ordered_over_several_devices_fails_every_device():
    # In a process of its own: as after io_callback(ordered=True), jax keeps
    # the failed program's token, and later ordered programs fail with it.
    script = textwrap.dedent("""
        import os
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
        import jax, jax.numpy as jnp, numpy as np, xlabind
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

        def fails(x):
            raise ValueError("no disk space")

        log = xlabind.callback(fails, lambda x: x, effect="ordered", name="log")
        mesh = Mesh(np.array(jax.devices()), ("d",))
        x = jax.device_put(jnp.arange(8.0), NamedSharding(mesh, P("d")))
        try:
            jax.block_until_ready(jax.jit(lambda x: log(x) + 1)(x))
        except Exception as e:
            print("FAILED:", e)
        """)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert re.search(
        r"(?s)FAILED: .*xlabind callback 'log' raised ValueError: no disk space.*"
        r"the call ran once, on the program's first device; every device of the "
        r"sharded program stopped",
        done.stdout,
    ), done.stdout + done.stderr


def test_ordered_inside_shard_map_runs_on_every_device(mesh):
    seen = []
    log = xlabind.callback(
        lambda x: (seen.append(float(np.asarray(x).sum())), x)[1],
        lambda x: x,
        effect="ordered",
        name="log",
    )
    body = jax.shard_map(
        lambda x: log(x * 2) + log(x), mesh=mesh, in_specs=P("d"), out_specs=P("d")
    )
    x = jax.device_put(jnp.arange(8.0), NamedSharding(mesh, P("d")))
    np.testing.assert_array_equal(jax.jit(body)(x), 3 * np.arange(8.0))
    jax.effects_barrier()
    # Each device's two calls in order: its 2x before its 1x.
    assert sorted(seen) == sorted(
        [2.0 * (2 * k + 2 * k + 1) for k in range(4)]
        + [1.0 * (2 * k + 2 * k + 1) for k in range(4)]
    )
    for k in range(4):
        shard = 2 * k + 2 * k + 1
        assert seen.index(2.0 * shard) < seen.index(1.0 * shard)


def test_ordered_refuses_a_sharding_rule():
    with pytest.raises(ValueError, match="log_a: effect='ordered' cannot have a sharding_rule"):
        logger([], "a", "ordered", sharding_rule="n -> n")


def test_unordered_with_a_sharding_rule_runs_once_per_device(mesh):
    seen = []
    log = logger(seen, "a", "unordered", sharding_rule="n -> n")
    x = jax.device_put(jnp.arange(8.0), NamedSharding(mesh, P("d")))
    jax.block_until_ready(jax.jit(lambda x: (log(x), x + 1)[1])(x))
    jax.effects_barrier()  # every device's program has run
    assert seen == ["a"] * 4
    # Its result unused in a program without a rule: once, on the first device.
    seen.clear()
    unruled = logger(seen, "b", "unordered")
    jax.block_until_ready(jax.jit(lambda x: (unruled(x), x + 1)[1])(x))
    jax.effects_barrier()
    assert seen == ["b"]


def test_unordered_without_a_rule_in_a_sharded_program(mesh):
    seen = []
    log = logger(seen, "a", "unordered")
    x = jax.device_put(jnp.arange(8.0), NamedSharding(mesh, P("d")))
    y = jax.jit(lambda x: log(x) * 2)(x)
    np.testing.assert_array_equal(y, 2 * np.arange(8.0))
    assert seen == ["a"]


# -- jax.export ----------------------------------------------------------------

_NATIVE_CHECKS = [
    export.DisabledSafetyCheck.custom_call(name) for name in ("xlabind_noop", "native_api_ticket")
]


def _exported_effectful(effect, mesh=None):
    if effect == "ordered":
        op = xlabind.callback(
            xlabind.ffi_target("native_api_ticket", takes_token=True),
            lambda x: (x, jax.ShapeDtypeStruct((), np.int32)),
            effect="ordered",
        )
        program = jax.jit(lambda x: op(op(x)[0] * 2)[0])
    else:
        op = xlabind.callback(
            xlabind.ffi_target("xlabind_noop"),
            lambda x: x,
            input_output_aliases={0: 0},
            effect="unordered",
        )
        program = jax.jit(lambda x: op(x) * 2)
    x = jnp.arange(8.0)
    if mesh is not None:
        x = jax.device_put(x, NamedSharding(mesh, P("d")))
    return export.export(program, disabled_checks=_NATIVE_CHECKS)(x), x


@pytest.mark.parametrize("devices", [1, 4])
@pytest.mark.parametrize("effect", ["unordered", "ordered"])
def test_a_native_target_with_an_effect_serializes_and_runs(effect, devices, mesh):
    # jax serializes an effect by its class: xlabind's are jax's io_callback
    # effects in a class of their own whose every instance equals them.
    exported, x = _exported_effectful(effect, mesh if devices > 1 else None)
    back = export.deserialize(exported.serialize())
    assert back.ordered_effects == exported.ordered_effects
    assert back.unordered_effects == exported.unordered_effects
    assert len(back.ordered_effects if effect == "ordered" else back.unordered_effects) == 1
    np.testing.assert_array_equal(back.call(x), 2 * np.arange(8.0))
    np.testing.assert_array_equal(jax.jit(back.call)(x), 2 * np.arange(8.0))


def test_an_ordered_call_after_an_io_callback_with_results_over_several_devices(mesh):
    # Wherever jax compiles two ordered io_callbacks with results over the
    # devices, an ordered xlabind call after one compiles too (jax 0.12 gave
    # the io_callback's token a replicated sharding, which XLA refuses).
    def bump(x):
        return np.asarray(x) + 1

    def io(x):
        return io_callback(bump, jax.ShapeDtypeStruct(x.shape, x.dtype), x, ordered=True)

    x = jax.device_put(jnp.arange(8.0), NamedSharding(mesh, P("d")))
    try:
        jax.jit(lambda x: io(io(x) * 2))(x)
    except jax.errors.JaxRuntimeError as error:  # jax 0.9 fails on its own program
        assert "side-effect HLO cannot have a replicated sharding" in str(error)
        pytest.skip(
            f"jax {jax.__version__} cannot compile two ordered io_callbacks with "
            f"results over several devices itself"
        )
    seen = []
    note = xlabind.callback(
        lambda x: (seen.append("xlabind"), 2 * np.asarray(x))[1], lambda x: x, effect="ordered"
    )

    def program(x):
        y = io(x)
        z = note(y)
        return note(io(z))

    np.testing.assert_array_equal(jax.jit(program)(x), 2 * (2 * (np.arange(8.0) + 1) + 1))
    jax.effects_barrier()
    assert seen == ["xlabind", "xlabind"]
