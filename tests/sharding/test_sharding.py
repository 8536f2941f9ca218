"""Sharded jit on 8 virtual CPU devices: a function without a sharding rule runs
once per program; one with a rule runs once per device, on its shard."""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
)

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from call_log import Calls, recorded_matmul
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import xlabind

jax.config.update("jax_enable_x64", True)


@pytest.fixture(scope="module")
def mesh():
    assert len(jax.devices()) == 8, "XLA_FLAGS must be set before jax is imported"
    return Mesh(np.array(jax.devices()), ("d",))


def rows(mesh, x, spec=P("d")):
    return jax.device_put(x, NamedSharding(mesh, spec))


def test_without_a_rule_it_runs_once_per_program(mesh):
    calls = Calls()
    op = xlabind.callback(lambda x: (calls.record(x), 2 * x)[1], lambda x: x)
    x = rows(mesh, jnp.arange(32.0).reshape(8, 4))
    y = jax.jit(op)(x)
    np.testing.assert_array_equal(y, 2 * np.arange(32.0).reshape(8, 4))
    assert calls.take() == [((8, 4),)]
    # Inside a larger sharded program, too.
    y = jax.jit(lambda x: jnp.sin(op(x * 2)) + x)(x)
    np.testing.assert_allclose(
        y, np.sin(4 * np.arange(32.0).reshape(8, 4)) + np.arange(32.0).reshape(8, 4)
    )
    assert calls.take() == [((8, 4),)]


@pytest.mark.parametrize(
    "dtype",
    [jnp.float32, jnp.int8, jnp.bool_, jnp.complex64, jnp.bfloat16, jnp.float8_e4m3fn, jnp.int4],
)
def test_once_per_program_keeps_every_dtype(mesh, dtype):
    op = xlabind.callback(lambda x: x[::-1].copy(), lambda x: x)
    x = rows(mesh, (jnp.arange(16) % 5).astype(dtype))
    np.testing.assert_array_equal(np.asarray(jax.jit(op)(x)), np.asarray(x)[::-1])


def test_with_a_rule_each_device_calls_once_on_its_shard(mesh):
    calls = Calls()
    op = xlabind.callback(
        lambda x, w: (calls.record(x, w), x * w)[1], lambda x, w: x, sharding_rule="b n, n -> b n"
    )
    x = rows(mesh, jnp.arange(64.0).reshape(16, 4))
    w = jnp.arange(4.0)
    y = jax.jit(op)(x, w)
    np.testing.assert_array_equal(y, np.arange(64.0).reshape(16, 4) * np.arange(4.0))
    assert sorted(calls.take()) == [((2, 4), (4,))] * 8
    assert y.sharding.spec == P("d")


def test_a_rule_on_replicated_inputs_runs_once(mesh):
    calls = Calls()
    op = xlabind.callback(
        lambda x: (calls.record(x), x + 1)[1], lambda x: x, sharding_rule="b n -> b n"
    )
    x = rows(mesh, jnp.zeros((8, 4)), P())
    np.testing.assert_array_equal(jax.jit(op)(x), np.ones((8, 4)))
    assert calls.take() == [((8, 4),)]


def test_on_a_two_dimensional_mesh_each_device_gets_its_tile():
    mesh2 = Mesh(np.array(jax.devices()).reshape(2, 4), ("a", "b"))
    calls = Calls()
    op = xlabind.callback(
        lambda x: (calls.record(x), -x)[1], lambda x: x, sharding_rule="i j -> i j"
    )
    x = jax.device_put(jnp.arange(64.0).reshape(8, 8), NamedSharding(mesh2, P("a", "b")))
    np.testing.assert_array_equal(jax.jit(op)(x), -np.arange(64.0).reshape(8, 8))
    assert calls.take() == [((4, 2),)] * 8


def test_transposes_inherit_the_rule(mesh):
    calls = Calls()

    def scale(x):
        calls.record(x)
        return 3 * x

    op = xlabind.linear(scale, scale, lambda x: x, sharding_rule="b n -> b n")
    x = rows(mesh, jnp.ones((8, 4)))
    g = jax.jit(jax.grad(lambda x: jnp.sum(op(x) ** 2)))(x)
    np.testing.assert_array_equal(g, np.full((8, 4), 18.0))
    assert calls.take() == [((1, 4),)] * 16  # the forward and the transpose, per device


def test_vmap_adds_an_independent_axis(mesh):
    calls = Calls()
    # A function of whole vectors (its n axis is not independent), vmapped over rows.
    op = xlabind.callback(
        lambda x: (calls.record(x), np.cumsum(x, axis=-1))[1],
        lambda x: x,
        vmap_method="expand_dims",
        sharding_rule="n -> n",
    )
    x = rows(mesh, jnp.ones((8, 4)))
    np.testing.assert_array_equal(jax.jit(jax.vmap(op))(x), np.cumsum(np.ones((8, 4)), axis=1))
    assert calls.take() == [((1, 4),)] * 8


def test_shard_map_calls_once_per_device_on_its_block(mesh):
    calls = Calls()
    op = xlabind.callback(lambda x: (calls.record(x), x * 2)[1], lambda x: x)
    f = jax.shard_map(op, mesh=mesh, in_specs=P("d"), out_specs=P("d"))
    x = rows(mesh, jnp.arange(16.0).reshape(8, 2))
    np.testing.assert_array_equal(jax.jit(f)(x), 2 * np.arange(16.0).reshape(8, 2))
    assert calls.take() == [((1, 2),)] * 8


def test_a_rule_that_does_not_fit_the_call_is_a_clear_error():
    op = xlabind.callback(lambda x: x, lambda x: x, sharding_rule="b n -> b", name="ruled")
    with pytest.raises(
        ValueError,
        match=r"ruled: sharding_rule 'b n -> b' gives result 0 1 "
        r"dimensions, it has shape \(2, 3\)",
    ):
        op(jnp.ones((2, 3)))
    op = xlabind.callback(lambda x, y: x, lambda x, y: x, sharding_rule="b, b -> b", name="ruled")
    with pytest.raises(ValueError, match=r"factor 'b' has sizes 2 and 3"):
        op(jnp.ones(2), jnp.ones(3))


def explicit_mesh(*names):
    return jax.make_mesh(
        (8 // 2 ** (len(names) - 1), *[2] * (len(names) - 1)),
        names,
        axis_types=(jax.sharding.AxisType.Explicit,) * len(names),
    )


def test_meshes_with_explicit_axes():
    calls = Calls()
    op = xlabind.callback(
        lambda x: (calls.record(x), x + 1)[1], lambda x: x, sharding_rule="b n -> b n"
    )
    mesh = explicit_mesh("d")
    x = jax.device_put(jnp.zeros((8, 4)), NamedSharding(mesh, P("d")))
    with jax.set_mesh(mesh):
        f = jax.jit(lambda x: op(x) * 2)
        y = f(x)
        compiled = f.lower(x).compile().as_text()
        traced = jax.make_jaxpr(op)(x).out_avals[0]
    np.testing.assert_array_equal(y, 2 * np.ones((8, 4)))
    assert calls.take() == [((1, 4),)] * 8
    # Partitioned by the rule, and typed so: nothing after the call gathers
    # what the rule split (jax's ffi_call gathers here: jax #38551).
    assert "all-gather" not in compiled and "all_gather" not in compiled
    assert y.sharding.is_equivalent_to(x.sharding, y.ndim)
    assert tuple(traced.sharding.spec) in (("d",), ("d", None)), traced


def test_explicit_axes_type_results_by_the_rule_through_transforms():
    rule = "b n -> b n"
    lin = xlabind.linear(
        lambda x: 3 * np.asarray(x), lambda c: 3 * np.asarray(c), lambda x: x, sharding_rule=rule
    )
    mesh = explicit_mesh("d")
    x = jax.device_put(jnp.ones((16, 4)), NamedSharding(mesh, P("d")))
    with jax.set_mesh(mesh):
        grad = jax.jit(jax.grad(lambda x: jnp.sum(lin(x) ** 2)))
        g = grad(x)
        compiled = grad.lower(x).compile().as_text()
        (ct,) = jax.vjp(lin, x)[1](x)
        t = jax.linear_transpose(lin, x)(x)[0]
    np.testing.assert_allclose(g, 18 * np.ones((16, 4)))
    np.testing.assert_allclose(ct, 3 * np.ones((16, 4)))
    np.testing.assert_allclose(t, 3 * np.ones((16, 4)))
    assert "all-gather" not in compiled and "all_gather" not in compiled
    for y in (g, ct, t):
        assert tuple(jax.typeof(y).sharding.spec)[:1] == ("d",), jax.typeof(y)


def test_explicit_axes_a_call_would_gather_is_a_clear_error():
    mesh = explicit_mesh("d")
    x = jax.device_put(jnp.zeros((8, 8)), NamedSharding(mesh, P("d")))
    columns = jax.device_put(jnp.zeros((8, 8)), NamedSharding(mesh, P(None, "d")))
    free = xlabind.callback(lambda x: x, lambda x: x, name="free")
    rows_only = xlabind.callback(
        lambda x: x, lambda x: x, sharding_rule="b n -> b n", name="rows_only"
    )
    pair = xlabind.callback(
        lambda x, y: x, lambda x, y: x, sharding_rule="b n, b n -> b n", name="pair"
    )
    with jax.set_mesh(mesh):
        with pytest.raises(
            ValueError,
            match=r"free: argument 0 is split over Explicit mesh axes .*no sharding_rule.*"
            r"jax.sharding.reshard",
        ):
            jax.jit(free)(x)
        # Gathered by the program itself, it runs once, on whole arrays.
        gathered = jax.jit(lambda x: free(jax.sharding.reshard(x, P())))(x)
        np.testing.assert_array_equal(gathered, np.zeros((8, 8)))
        with pytest.raises(ValueError, match=r"pair: .*one mesh axis \('d'\) for two factors"):
            jax.jit(pair)(x, columns)
        with pytest.raises(
            ValueError, match=r"rows_only: vmap_method='sequential'.*split over Explicit"
        ):
            jax.vmap(rows_only)(x.reshape(8, 2, 4))
    grid = explicit_mesh("a", "b")
    with jax.set_mesh(grid):
        by_a = jax.device_put(jnp.zeros((8, 8)), NamedSharding(grid, P("a")))
        by_b = jax.device_put(jnp.zeros((8, 8)), NamedSharding(grid, P("b")))
        with pytest.raises(ValueError, match=r"pair: .*different Explicit mesh axes"):
            jax.jit(pair)(by_a, by_b)


def test_a_rule_can_describe_arrays_with_no_dimensions(mesh):
    calls = Calls()

    def scale(s, x):
        calls.record(s, x)
        return np.asarray(s) * np.asarray(x)

    op = xlabind.callback(scale, lambda s, x: x, sharding_rule="(), b -> b")
    x = rows(mesh, jnp.arange(8.0))
    np.testing.assert_array_equal(jax.jit(op)(jnp.asarray(3.0), x), 3 * np.arange(8.0))
    assert sorted(calls.take()) == [((), (1,))] * 8
    only = xlabind.callback(lambda s: 2 * np.asarray(s), lambda s: s, sharding_rule="() -> ()")
    assert float(jax.jit(only)(jnp.asarray(4.0))) == 8.0
    with pytest.raises(
        ValueError,
        match=r"describes 0 operands, the call has 1 \(write '\(\)' "
        r"for one with no dimensions\)",
    ):
        xlabind.callback(lambda s: s, lambda s: s, sharding_rule=" -> ()")(jnp.asarray(1.0))


# -- a failure on one device stops every device, promptly ----------------------
# Without the status exchange these hang for 40 s and then abort the process
# (XLA's collective timeout), so a regression fails the whole file.


def _fails_on_row(row):
    def fn(x):
        x = np.asarray(x)
        if row in x[:, 0]:
            raise ValueError(f"bad row {row}")
        return 2 * x

    return fn


def test_a_failure_once_per_program_stops_every_device(mesh):
    op = xlabind.callback(_fails_on_row(8.0), lambda x: x)
    x = rows(mesh, jnp.arange(32.0).reshape(8, 4))
    with pytest.raises(
        Exception,
        match=r"(?s)ValueError: bad row 8.0.*ran once, on the program's "
        r"first device; every device of the sharded program "
        r"stopped at this call",
    ):
        jax.jit(lambda x: jnp.sin(op(x)) + x)(x).block_until_ready()
    np.testing.assert_allclose(jax.jit(op)(x + 100), 2 * (np.arange(32.0).reshape(8, 4) + 100))


def test_a_failure_on_one_device_of_a_sharded_call_stops_every_device(mesh):
    op = xlabind.callback(_fails_on_row(12.0), lambda x: x, sharding_rule="r c -> r c")
    x = rows(mesh, jnp.arange(32.0).reshape(8, 4))  # row 12 is on device 3
    with pytest.raises(
        Exception,
        match=r"(?s)ValueError: bad row 12.0.*on device 3 of the 8 "
        r"that ran the call, counted in the mesh's device order; every device",
    ):
        # The sum after the call is a collective every device would wait in.
        jax.jit(lambda x: jnp.sum(op(x)) + x)(x).block_until_ready()
    # Counted in the mesh's order, which need not be jax's: reversed, row 12
    # is on jax's device 4, still the mesh's device 3.
    placed = rows(Mesh(np.array(jax.devices()[::-1]), ("d",)), x)
    holder = [s.device for s in placed.addressable_shards if 12.0 in np.asarray(s.data)[:, 0]]
    assert holder == [jax.devices()[4]]
    with pytest.raises(
        Exception, match=r"(?s)bad row 12.0.*on device 3 of the 8 that ran the call, counted in"
    ):
        jax.jit(op)(placed).block_until_ready()


def test_a_failure_inside_shard_map_stops_every_device(mesh):
    op = xlabind.callback(_fails_on_row(20.0), lambda x: x)
    f = jax.jit(
        jax.shard_map(lambda x: jax.lax.psum(op(x), "d"), mesh=mesh, in_specs=P("d"), out_specs=P())
    )
    with pytest.raises(Exception, match=r"(?s)bad row 20.0.*on device 5 of the 8"):
        f(rows(mesh, jnp.arange(32.0).reshape(8, 4))).block_until_ready()
    # Every device failing: the first one's message, and how many failed.
    every = xlabind.callback(_fails_on_row_always, lambda x: x, sharding_rule="r c -> r c")
    with pytest.raises(
        Exception,
        match=r"(?s)always.*on device 0 of the 8 that ran the call, counted in the mesh's "
        r"device order \(8 of them failed; this is the first\)",
    ):
        jax.jit(every)(rows(mesh, jnp.ones((8, 4)))).block_until_ready()


def _fails_on_row_always(x):
    raise RuntimeError("always")


def test_a_native_target_error_stops_every_device(mesh):
    gather = xlabind.callback(
        xlabind.ffi_target("xlabind_map_coordinates"),
        lambda g, c, **_: jax.ShapeDtypeStruct(c.shape, g.dtype),
    )
    grid = rows(mesh, jnp.arange(8.0))
    with pytest.raises(
        Exception,
        match=r"(?s)native target 'xlabind_map_coordinates' failed: "
        r"xlabind_map_coordinates: order must be 0 to 5, got 7.*"
        r"every device of the sharded program stopped",
    ):
        jax.jit(lambda g: gather(g, jnp.ones(4), order=7, mode=0, derivative=(0,)) + 1)(
            grid
        ).block_until_ready()


def _all_reduces(f, *args) -> int:
    """How many all-reduces the compiled program runs (start ops counted once)."""
    hlo = f.lower(*args).compile().as_text()
    return sum(
        1
        for line in hlo.splitlines()
        if "= " in line and (" all-reduce(" in line or " all-reduce-start(" in line)
    )


def test_stop_all_devices_false_leaves_out_the_per_call_collective(mesh):
    """Each per-device call's status all-reduce (status_exchange.py) is what
    stop_all_devices=False leaves out, for callbacks and for the transposes
    of linear functions alike; the results stay the same."""
    x = rows(mesh, jnp.arange(32.0).reshape(8, 4))
    expected = 4 * np.arange(32.0).reshape(8, 4)
    counts = {}
    for stops in (True, False):
        op = xlabind.callback(
            _fails_on_row(-1.0), lambda x: x, sharding_rule="r c -> r c", stop_all_devices=stops
        )
        twice = jax.jit(lambda x, op=op: op(op(x)))
        np.testing.assert_allclose(twice(x), expected)
        scale = xlabind.linear(
            lambda x: 3 * np.asarray(x),
            lambda ct: 3 * np.asarray(ct),
            lambda x: x,
            sharding_rule="r c -> r c",
            stop_all_devices=stops,
        )
        transpose = jax.jit(jax.linear_transpose(scale, x))
        np.testing.assert_allclose(transpose(x)[0], 3 * np.arange(32.0).reshape(8, 4))
        counts[stops] = (_all_reduces(twice, x), _all_reduces(transpose, x))
    assert counts[True][0] >= 2 and counts[True][1] >= 1, counts
    assert counts[False] == (0, 0), counts


def test_functions_alike_but_for_stop_all_devices_partition_apart(mesh):
    """Two bindings of one native target that differ only in stop_all_devices
    get partitionings of their own, in either order (the first one alive):
    the partitioning's name covers the setting, and so does the persistent
    cache's key, which holds that name."""
    x = rows(mesh, jnp.arange(8.0), P())
    points = rows(mesh, jnp.linspace(0.5, 6.5, 16))
    for order in ((True, False), (False, True)):
        kept, counts = [], {}
        for stops in order:
            gather = xlabind.callback(
                xlabind.ffi_target("xlabind_map_coordinates"),
                lambda g, c, **_: jax.ShapeDtypeStruct(c.shape, g.dtype),
                sharding_rule="g, p -> p",
                stop_all_devices=stops,
                name="gather",
            )
            kept.append(gather)
            f = jax.jit(lambda g, c, gather=gather: gather(g, c, order=1, mode=0, derivative=(0,)))
            counts[stops] = _all_reduces(f, x, points)
            np.testing.assert_allclose(f(x, points), np.linspace(0.5, 6.5, 16))
        assert counts[True] >= 1 and counts[False] == 0, (order, counts)


def test_stop_all_devices_false_runs_where_only_some_devices_go(mesh):
    """In a jax.shard_map branch or loop that only some devices take, the
    default's exchange would wait for the others (an abort after 40 s on the
    CPU); without it each device runs its own calls."""
    calls = Calls()

    def double(x):
        calls.record(x)
        return 2 * np.asarray(x)

    op = xlabind.callback(double, lambda x: x, stop_all_devices=False)
    x = rows(mesh, jnp.ones((8, 4)))

    def first_only(x):
        return jax.lax.cond(jax.lax.axis_index("d") == 0, op, lambda x: x, x)

    def index_times(x):  # device d calls op d times
        return jax.lax.fori_loop(0, jax.lax.axis_index("d"), lambda _, x: op(x), x)

    for body, factors in ((first_only, [2] + [1] * 7), (index_times, [2**d for d in range(8)])):
        f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("d"), out_specs=P("d")))
        np.testing.assert_allclose(f(x), np.repeat(factors, 4).reshape(8, 4).astype(float))
    assert calls.take() == [((1, 4),)] * (1 + sum(range(8)))


def test_stop_all_devices_false_fails_only_the_failing_device(mesh):
    """Without the exchange a failure ends its own device's run (with no
    collective after it, the others finish); a call once per program keeps
    its check."""
    op = xlabind.callback(
        _fails_on_row(12.0), lambda x: x, sharding_rule="r c -> r c", stop_all_devices=False
    )
    x = rows(mesh, jnp.arange(32.0).reshape(8, 4))
    with pytest.raises(Exception, match=r"bad row 12.0") as raised:
        jax.jit(op)(x).block_until_ready()  # no collective after it: nothing waits
    assert "every device" not in str(raised.value)
    # A call once per program keeps its check: its status travels in the
    # collective that brings its results to the other devices, which a
    # failure would otherwise leave waiting.
    once = xlabind.callback(_fails_on_row(8.0), lambda x: x, stop_all_devices=False)
    with pytest.raises(Exception, match=r"(?s)bad row 8.0.*every device of the sharded program"):
        jax.jit(lambda x: jnp.sin(once(x)) + x)(x).block_until_ready()
    with pytest.raises(TypeError, match=r"picky: stop_all_devices must be True or False, got 0"):
        xlabind.callback(np.sin, lambda x: x, stop_all_devices=0, name="picky")
    # A NumPy bool (from a config array, say) is a bool.
    plain = xlabind.callback(
        _fails_on_row(-1.0), lambda x: x, sharding_rule="r c -> r c", stop_all_devices=np.False_
    )
    assert _all_reduces(jax.jit(plain), x) == 0


def test_every_result_dtype_travels_from_the_first_device(mesh):
    # Once per program, results and status go to the other devices as bytes.
    values = [
        np.array([True, False]),
        np.array([-3, 4], np.int8),
        np.array([1.5, -2], np.float16),
        np.array([1 + 2j, -3j], np.complex64),
        np.array([2**40, -1], np.int64),
        np.array([0.5, -0.0]),
        np.zeros((0, 3), np.float32),
        # No zero: its jnp.zeros are 0xff bytes, which the sum once added in.
        np.array([1, 2, 4, 0.5], ml_dtypes.float8_e8m0fnu),
    ]
    op = xlabind.callback(
        lambda x: tuple(values), tuple(jax.ShapeDtypeStruct(v.shape, v.dtype) for v in values)
    )
    for got, want in zip(jax.jit(op)(rows(mesh, jnp.ones(8))), values):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), want)
        assert np.array_equal(np.signbit(np.asarray(got).real), np.signbit(want.real))


@pytest.mark.parametrize("check_vma", [True, False])
def test_gradients_and_transposes_inside_shard_map_are_jnps(mesh, check_vma):
    scale = xlabind.linear(lambda x: 3 * np.asarray(x), lambda ct: 3 * np.asarray(ct), lambda x: x)
    sin = xlabind.nonlinear(
        np.sin, lambda x: x, jvp=lambda x, t: np.cos(x) * t, vjp=lambda x, ct: np.cos(x) * ct
    )
    x = rows(mesh, jnp.linspace(0.0, 1.0, 16))

    def in_shard_map(f):
        return jax.shard_map(f, mesh=mesh, in_specs=P("d"), out_specs=P("d"), check_vma=check_vma)

    for ours, theirs in ((scale, lambda x: 3 * x), (sin, jnp.sin)):
        g = jax.grad(lambda x, ours=ours: jnp.sum(in_shard_map(ours)(x) ** 2))(x)
        want = jax.grad(lambda x, theirs=theirs: jnp.sum(in_shard_map(theirs)(x) ** 2))(x)
        np.testing.assert_allclose(g, want, rtol=1e-12)
    # A replicated operand mixed with a sharded one: its cotangent is the psum.
    mul = xlabind.multilinear(
        lambda a, b: np.asarray(a) * np.asarray(b),
        (
            lambda b, ct: np.asarray(b) * np.asarray(ct),
            lambda a, ct: np.asarray(a) * np.asarray(ct),
        ),
        lambda a, b: b,
    )
    w = jnp.full(2, 0.5)  # replicated, the same block on every device
    f = jax.shard_map(
        lambda w, x: mul(w, x),
        mesh=mesh,
        in_specs=(P(), P("d")),
        out_specs=P("d"),
        check_vma=check_vma,
    )
    f_jnp = jax.shard_map(
        lambda w, x: w * x, mesh=mesh, in_specs=(P(), P("d")), out_specs=P("d"), check_vma=check_vma
    )
    for argnums in (0, 1):
        np.testing.assert_allclose(
            jax.grad(lambda w, x: jnp.sum(jnp.sin(f(w, x))), argnums=argnums)(w, x),
            jax.grad(lambda w, x: jnp.sum(jnp.sin(f_jnp(w, x))), argnums=argnums)(w, x),
            rtol=1e-12,
        )
    (t,) = jax.linear_transpose(in_shard_map(scale), x)(jnp.ones(16))
    np.testing.assert_allclose(t, 3 * np.ones(16))


def test_map_coordinates_gradients_inside_shard_map(mesh):
    from jax.scipy.ndimage import map_coordinates as reference

    from xlabind.ops import map_coordinates

    grid = jnp.arange(20.0).reshape(4, 5)
    coords = rows(mesh, jnp.linspace(0.1, 3.3, 64).reshape(8, 8))
    for check_vma in (True, False):
        grads = []
        for mc in (map_coordinates, reference):
            f = jax.shard_map(
                lambda g, c, mc=mc: mc(g, [c, c], 1, "nearest"),
                mesh=mesh,
                in_specs=(P(), P("d")),
                out_specs=P("d"),
                check_vma=check_vma,
            )
            grads.append(
                jax.grad(lambda g, c, f=f: jnp.sum(f(g, c) ** 2), argnums=(0, 1))(grid, coords)
            )
        for ours, theirs in zip(*grads):
            np.testing.assert_allclose(ours, theirs, rtol=1e-12)


# -- summed factors (reductions) -------------------------------------------------


@pytest.fixture(params=["shardy", "gspmd"])
def partitioner(request):
    """Both of jax's partitioners: Shardy (the default) and GSPMD."""
    before = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", request.param == "shardy")
    yield request.param
    jax.config.update("jax_use_shardy_partitioner", before)


def test_a_summed_factor_is_split_and_the_partial_results_added(mesh, partitioner):
    calls = Calls()
    op = recorded_matmul(calls)
    a, b = np.arange(64.0).reshape(4, 16) / 16, np.arange(48.0).reshape(16, 3) / 16
    a_, b_ = rows(mesh, a, P(None, "d")), rows(mesh, b)
    y = jax.jit(op)(a_, b_)
    np.testing.assert_allclose(y, a @ b, rtol=1e-12)
    # Each device multiplies its 2 of the 16 columns by its 2 rows: no gather.
    assert calls.take() == [((4, 2), (2, 3))] * 8
    ga, gb = jax.jit(jax.grad(lambda a, b: jnp.sum(jnp.sin(op(a, b))), argnums=(0, 1)))(a_, b_)
    want = jax.grad(lambda a, b: jnp.sum(jnp.sin(a @ b)), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ga, want[0], rtol=1e-12)
    np.testing.assert_allclose(gb, want[1], rtol=1e-12)
    # The transposes are split too (n is independent in them): no gather.
    assert sorted(set(calls.take())) == [((2, 3), (4, 3)), ((4, 2), (2, 3)), ((4, 2), (4, 3))]
    # The independent factor sharded instead (the summed one whole): rows split.
    y = jax.jit(op)(rows(mesh, np.ones((16, 4))), jnp.ones((4, 3)))
    np.testing.assert_array_equal(y, np.full((16, 3), 4.0))
    assert calls.take() == [((2, 4), (4, 3))] * 8


def test_the_transpose_of_a_broadcast_runs_on_whole_arrays(mesh, partitioner):
    """The rows b are the broadcast's result alone: no block of its operands
    computes them, so its transpose, which sums them, runs whole. (Split by
    rows, a transpose that is no plain sum, a filter's, would be given
    blocks of lines it cannot place.)"""
    calls = Calls()

    def broadcast(x, *, n):
        calls.record(x)
        return np.broadcast_to(np.asarray(x), (n, *x.shape)).copy()

    def summed(ct, *, n):
        calls.record(ct)
        return np.asarray(ct).sum(axis=0)

    op = xlabind.linear(
        broadcast,
        summed,
        lambda x, *, n: jax.ShapeDtypeStruct((n, *x.shape), x.dtype),
        sharding_rule="m -> b m",
    )
    w = rows(mesh, np.arange(48.0).reshape(16, 3))
    g = jax.jit(jax.grad(lambda x, w: jnp.sum(op(x, n=16) * w)))(jnp.zeros(3), w)
    np.testing.assert_allclose(g, np.arange(48.0).reshape(16, 3).sum(axis=0))
    assert set(calls.take()) == {((16, 3),)}


def test_a_vjp_sums_what_an_argument_without_the_factor_gets(mesh, partitioner):
    calls = Calls()

    def vjp(x, s, ct):
        calls.record(x, s, ct)
        x, s, ct = np.asarray(x), np.asarray(s), np.asarray(ct)
        return ct * np.sin(s), np.sum(ct * x * np.cos(s))

    op = xlabind.nonlinear(
        lambda x, s: np.asarray(x) * np.sin(s),
        lambda x, s: x,
        jvp=lambda x, s, tx, ts: tx * np.sin(s) + x * np.cos(s) * ts,
        vjp=vjp,
        sharding_rule="b, () -> b",
    )
    x, s = np.linspace(0.0, 1.0, 16), 0.3
    gx, gs = jax.jit(jax.grad(lambda x, s: jnp.sum(op(x, s) ** 2), argnums=(0, 1)))(
        rows(mesh, x), jnp.asarray(s)
    )
    wx, ws = jax.grad(lambda x, s: jnp.sum((x * jnp.sin(s)) ** 2), argnums=(0, 1))(x, s)
    np.testing.assert_allclose(gx, wx, rtol=1e-12)
    np.testing.assert_allclose(gs, ws, rtol=1e-12)
    assert calls.take() == [((2,), (), (2,))] * 8


def test_summed_factors_that_cannot_be_summed_are_clear_errors():
    def op(rule, result=jax.ShapeDtypeStruct((1,), jnp.float32)):
        return xlabind.callback(lambda a: a, lambda a: result, sharding_rule=rule, name="ruled")

    with pytest.raises(
        ValueError,
        match=r"ruled: sharding_rule 'n -> n': summed factor 'n' is "
        r"a dimension of a result",
    ):
        op(xlabind.ShardingRule("n -> n", summed="n"), jax.ShapeDtypeStruct((4,), jnp.float32))(
            jnp.ones(4)
        )
    with pytest.raises(ValueError, match=r"summed factor 'k' names no dimension of an operand"):
        op(xlabind.ShardingRule("n -> m", summed=("k",)))(jnp.ones(4))
    with pytest.raises(ValueError, match=r"sums over \('n',\), but result 0 is bool"):
        op(xlabind.ShardingRule("n -> ()", summed="n"), jax.ShapeDtypeStruct((), jnp.bool_))(
            jnp.ones(4)
        )
    with pytest.raises(ValueError, match=r"or an xlabind.ShardingRule, got 3"):
        op(3)(jnp.ones(4))


def test_map_coordinates_splits_points_and_sums_the_grid_gradient(mesh, partitioner):
    from xlabind.ops import map_coordinates

    rng = np.random.default_rng(0)
    grid = rng.normal(size=(6, 7, 5))
    coords = [rng.uniform(-1.0, s, size=64) for s in grid.shape]

    def loss(grid, *coords):
        return jnp.sum(jnp.sin(map_coordinates(grid, list(coords), 1, "constant", cval=0.5)))

    both = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3)))
    value, grads = both(grid, *coords)
    sharded = [rows(mesh, c) for c in coords]
    value8, grads8 = both(grid, *sharded)
    np.testing.assert_allclose(value8, value, rtol=1e-12)
    for ours, theirs in zip(grads8, grads):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-14)
    assert grads8[1].sharding.spec == P("d")
    # Nothing is gathered (the statuses travel by all-reduce, and the points
    # stay where they are); the grid gradient is one all-reduce.
    hlo = both.lower(grid, *sharded).compile().as_text()
    assert "all-gather" not in hlo
    assert any("all-reduce" in line and "f64[6,7,5]" in line for line in hlo.splitlines())


def test_native_calls_that_differ_only_in_their_results_partition_apart(mesh):
    """The grid gradient's scatter-add has the same operands (the points'
    cotangents and coordinates) for any grid: its partitioning, named by what
    it depends on so that programs stay cacheable, must still differ with the
    grid's shape and dtype. It once reused the first grid's, and XLA refused
    the second ("Mismatch in result shapes")."""
    from xlabind.ops import map_coordinates

    rng = np.random.default_rng(1)
    coords = [rng.uniform(0.0, 4.0, size=64) for _ in range(3)]
    sharded = [rows(mesh, c) for c in coords]
    for shape, dtype in [((5, 5, 5), np.float64), ((7, 6, 5), np.float64), ((7, 6, 5), np.float32)]:
        grid = rng.normal(size=shape).astype(dtype)
        grad = jax.jit(jax.grad(lambda g, *c: jnp.sum(map_coordinates(g, list(c), 1, "mirror"))))
        ours, theirs = grad(grid, *sharded), grad(grid, *coords)
        assert ours.shape == shape and ours.dtype == dtype
        np.testing.assert_allclose(ours, theirs, rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_check_sharding_finds_a_rule_the_function_does_not_keep(mesh):
    # cumsum is not independent in n: a rule that says so splits it wrongly.
    wrong = xlabind.callback(
        lambda x: np.cumsum(np.asarray(x)), lambda x: x, sharding_rule="n -> n", name="cumsum"
    )
    x = rows(mesh, np.arange(16.0))
    with pytest.raises(
        AssertionError,
        match=r"check_sharding: cumsum: result 0 differs between "
        r"the sharded call and the call on one device",
    ):
        xlabind.check_sharding(wrong, x)
    # A sum over n declared as such is right, and passes.
    total = xlabind.callback(
        lambda x: np.asarray(np.asarray(x).sum()),
        lambda x: jax.ShapeDtypeStruct((), x.dtype),
        sharding_rule=xlabind.ShardingRule("n -> ()", summed="n"),
    )
    xlabind.check_sharding(total, x)
    xlabind.check_sharding(
        recorded_matmul(Calls()),
        rows(mesh, np.ones((3, 16)), P(None, "d")),
        rows(mesh, np.ones((16, 2))),
    )
    # float32 sums in another order: within the dtype's default tolerance.
    columns = xlabind.callback(
        lambda x: np.asarray(x).sum(0),
        lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype),
        sharding_rule=xlabind.ShardingRule("n m -> m", summed="n"),
    )
    noise = np.random.default_rng(0).normal(size=(1024, 64)).astype(np.float32)
    xlabind.check_sharding(columns, rows(mesh, noise))
    # Integers must agree exactly.
    xlabind.check_sharding(columns, rows(mesh, np.arange(64 * 8).reshape(64, 8)))


@pytest.mark.parametrize("axis_type", ["Auto", "Explicit"])
def test_check_sharding_under_a_context_mesh(axis_type):
    """Inside `with jax.set_mesh(mesh):` the call on one device still runs,
    so a wrong rule is reported and a right one passes."""
    mesh = jax.make_mesh((8,), ("d",), axis_types=(getattr(jax.sharding.AxisType, axis_type),))
    x = jax.device_put(jnp.arange(16.0), NamedSharding(mesh, P("d")))
    wrong = xlabind.callback(
        lambda x: np.cumsum(np.asarray(x)), lambda x: x, sharding_rule="n -> n", name="cumsum"
    )
    right = xlabind.callback(lambda x: 2 * np.asarray(x), lambda x: x, sharding_rule="n -> n")
    with jax.set_mesh(mesh):
        with pytest.raises(AssertionError, match=r"check_sharding: cumsum: result 0 differs"):
            xlabind.check_sharding(wrong, x)
        xlabind.check_sharding(right, x)


def test_map_coordinates_under_vmap_keeps_the_batch_sharded(mesh, partitioner):
    from xlabind.ops import map_coordinates

    rng = np.random.default_rng(1)
    grids = rng.normal(size=(8, 5, 6))
    coords = rng.uniform(-1.0, 6.0, size=(8, 2, 32))

    def batch(grids, coords):
        return jax.vmap(lambda g, c: map_coordinates(g, [c[0], c[1]], 1, "nearest"))(grids, coords)

    def loss(grids, coords):
        return jnp.sum(jnp.sin(batch(grids, coords)))

    want = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))(grids, coords)
    got = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))(rows(mesh, grids), rows(mesh, coords))
    for ours, theirs in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-14)
    assert jax.jit(batch)(rows(mesh, grids), rows(mesh, coords)).sharding.spec[0] == "d"


def test_shard_map_manual_over_some_axes_under_both_partitioners(partitioner):
    # GSPMD cannot compile an all-gather there: the status exchange uses all-reduces.
    mesh2 = Mesh(np.array(jax.devices()).reshape(2, 4), ("a", "b"))
    op = xlabind.callback(
        lambda a, b: np.asarray(a) @ np.asarray(b),
        lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), a.dtype),
    )
    f = jax.jit(
        jax.shard_map(
            lambda a, b: jax.lax.psum(op(a, b), "a"),
            mesh=mesh2,
            in_specs=(P(None, "a"), P("a", None)),
            out_specs=P(),
            axis_names={"a"},
        )
    )
    a = jax.device_put(np.ones((8, 16)), NamedSharding(mesh2, P("b", "a")))
    b = jax.device_put(np.ones((16, 4)), NamedSharding(mesh2, P("a", None)))
    if partitioner == "gspmd" and jax.__version_info__ < (0, 10):
        # That XLA aborts on any custom call there: a clear error instead.
        with pytest.raises(
            NotImplementedError,
            match=r"manual over some mesh axes only under "
            r"GSPMD",
        ):
            f(a, b)
        return
    np.testing.assert_array_equal(f(a, b), np.full((8, 4), 16.0))


def test_derivatives_keep_whole_what_the_function_keeps_whole(mesh, partitioner):
    # b is whole in the function (the scalar result lacks it), and every result
    # of the transpose has it: the transpose must still see all of b.
    op = xlabind.linear(
        lambda x: (np.cumsum(x), np.asarray(np.sum(x))),
        lambda ct_c, ct_s: np.cumsum(np.asarray(ct_c)[::-1])[::-1] + ct_s,
        lambda x: (x, jax.ShapeDtypeStruct((), x.dtype)),
        sharding_rule="b -> b, ()",
    )
    x, w = np.arange(16.0), np.linspace(0.0, 1.0, 16)
    g = jax.jit(jax.grad(lambda x, w: jnp.sum(op(x)[0] * w) + op(x)[1]))(
        rows(mesh, x), rows(mesh, w)
    )
    want = jax.grad(lambda x, w: jnp.sum(jnp.cumsum(x) * w) + jnp.sum(x))(x, w)
    np.testing.assert_allclose(g, want, rtol=1e-12)
    # A logsumexp over n (neither independent nor summed) with x split on n:
    # the VJP sees whole rows.
    calls = Calls()

    def logsumexp(x, v):
        z = np.asarray(x) + np.asarray(v)
        return np.log(np.exp(z).sum(1))

    def softmax(x, v):
        e = np.exp(np.asarray(x) + np.asarray(v))
        return e / e.sum(1, keepdims=True)

    def vjp(x, v, ct):
        calls.record(x, v, ct)
        s = softmax(x, v) * np.asarray(ct)[:, None]
        return s, s.sum(0)

    lse = xlabind.nonlinear(
        logsumexp,
        lambda x, v: jax.ShapeDtypeStruct(x.shape[:1], x.dtype),
        jvp=lambda x, v, tx, tv: (softmax(x, v) * (tx + tv)).sum(1),
        vjp=vjp,
        sharding_rule="b n, n -> b",
    )
    x, v = np.linspace(-1.0, 1.0, 64).reshape(4, 16), np.linspace(0.0, 0.5, 16)
    loss = lambda x, v, f: jnp.sum(jnp.sin(f(x, v)))
    got = jax.jit(jax.grad(lambda x, v: loss(x, v, lse), argnums=(0, 1)))(
        rows(mesh, x, P(None, "d")), v
    )
    want = jax.grad(
        lambda x, v: loss(x, v, lambda x, v: jax.nn.logsumexp(x + v, axis=1)), argnums=(0, 1)
    )(x, v)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert set(calls.take()) == {((4, 16), (16,), (4,))}


def test_check_sharding_with_nothing_split_says_it_checked_nothing(mesh):
    total = xlabind.callback(
        lambda x: np.asarray(np.asarray(x).sum()),
        lambda x: jax.ShapeDtypeStruct((), x.dtype),
        name="total",
        sharding_rule=xlabind.ShardingRule("n -> ()", summed="n"),
    )
    replicated = jax.device_put(np.arange(16.0), NamedSharding(mesh, P()))
    for args in ((np.arange(16.0),), (jnp.arange(16.0),), (replicated,)):
        with pytest.raises(
            ValueError,
            match=r"check_sharding: total: no argument is split "
            r"across devices, so .* nothing to compare",
        ):
            xlabind.check_sharding(total, *args)


def test_native_targets_whose_array_attributes_differ_partition_apart(mesh):
    # NumPy's repr rounds these alike; the partitioning's name once did too, so
    # the second program was compiled with the first one's attribute values.
    points = rows(mesh, jnp.zeros(64))

    def compiled_text(scale):
        target = xlabind.ffi_target("xlabind_map_coordinates", scale=scale)
        op = xlabind.callback(target, lambda g, i, j: i, sharding_rule="g0 g1, p, p -> p")
        return jax.jit(op).lower(jnp.zeros((4, 4)), points, points).compile().as_text()

    first = compiled_text(np.array([1.0, 1.0000000001]))
    second = compiled_text(np.array([1.0, 1.0000000002]))
    assert "1.0000000001" in first and "1.0000000002" not in first
    assert "1.0000000002" in second and "1.0000000001" not in second


def test_python_functions_alike_but_for_what_they_close_over_partition_apart(mesh):
    # Named by what they are (so that other processes find the program in the
    # persistent cache), they still name one function each in a process.
    def scaled(k):
        return xlabind.callback(
            lambda x: np.asarray(x) * k, lambda x: x, sharding_rule="n -> n", name="scaled"
        )

    x = rows(mesh, jnp.ones(8))
    for k in (2.0, 3.0, 2.0):
        np.testing.assert_array_equal(jax.jit(scaled(k))(x), np.full(8, k))


def test_explicit_axes_a_whole_arguments_cotangent_is_typed_whole():
    """grad in a whole argument of a call whose rule splits it along a
    factor it shares with a split argument: typed like its primal."""
    mesh = explicit_mesh("d")
    x_np = np.arange(48.0, dtype=np.float32).reshape(16, 3)
    w_np = np.linspace(1, 2, 48, dtype=np.float32).reshape(16, 3)
    product = xlabind.multilinear(
        lambda x, w: np.asarray(x) * np.asarray(w),
        [lambda w, c: np.asarray(c) * np.asarray(w), lambda x, c: np.asarray(c) * np.asarray(x)],
        lambda x, w: x,
        sharding_rule="b n, b n -> b n",
    )
    scale = xlabind.linear(
        lambda w, x: np.asarray(w) * np.asarray(x),
        lambda c, x: np.asarray(c) * np.asarray(x),
        lambda w, x: w,
        nondiff_argnums=(1,),
        sharding_rule="b n, b n -> b n",
    )
    x = jax.device_put(x_np, NamedSharding(mesh, P("d")))
    w = jax.device_put(w_np, NamedSharding(mesh, P()))
    with jax.set_mesh(mesh):
        for f in (product, lambda x, w: scale(w, x)):
            g = jax.jit(jax.grad(lambda w, f=f: jnp.sum(f(x, w) ** 2)))(w)
            np.testing.assert_allclose(g, 2 * x_np**2 * w_np, rtol=1e-6)
            assert jax.typeof(g).sharding.spec in (P(), P(None, None)), jax.typeof(g)


def test_explicit_axes_without_a_rule_a_split_cotangent_is_gathered():
    """A function without a rule on reshard(x, P()) runs on whole arrays, and
    so do its derivatives, whatever split the cotangent arrives with."""
    mesh = explicit_mesh("d")
    x_np = np.linspace(0, 1, 48, dtype=np.float32).reshape(16, 3)
    double = xlabind.linear(lambda x: 2 * np.asarray(x), lambda c: 2 * np.asarray(c), lambda x: x)
    sine = xlabind.nonlinear(
        lambda x: np.sin(np.asarray(x)),
        lambda x: x,
        jvp=lambda x, t: np.cos(np.asarray(x)) * np.asarray(t),
        vjp=lambda x, c: np.cos(np.asarray(x)) * np.asarray(c),
    )
    x = jax.device_put(x_np, NamedSharding(mesh, P("d")))
    with jax.set_mesh(mesh):
        for f, df in ((double, lambda x: 2 + 0 * x), (sine, np.cos)):
            loss = lambda x, f=f: jnp.sum(f(jax.sharding.reshard(x, P())) * x)
            g = jax.jit(jax.grad(loss))(x)
            want = x_np * df(x_np) + (2 * x_np if f is double else np.sin(x_np))
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
            assert jax.typeof(g).sharding.spec[0] == "d"


def test_an_ordered_call_in_a_partly_manual_shard_map_is_refused():
    """XLA aborts the process on the ordering token there (as for jax's
    io_callback(ordered=True), which jax refuses): a clear error instead."""
    mesh = explicit_mesh("a", "b")
    x = jax.device_put(jnp.arange(16.0), NamedSharding(mesh, P(("a", "b"))))
    logged = xlabind.callback(lambda x: 2 * np.asarray(x), lambda x: x, effect="ordered")
    with jax.set_mesh(mesh):
        partly = jax.shard_map(
            logged, mesh=mesh, in_specs=P("a"), out_specs=P("a"), axis_names={"a"}
        )
        with pytest.raises(NotImplementedError, match=r"effect='ordered'.*manual over some mesh"):
            jax.jit(partly).lower(x)
        every = jax.shard_map(logged, mesh=mesh, in_specs=P(("a", "b")), out_specs=P(("a", "b")))
        np.testing.assert_array_equal(jax.jit(every)(x), 2 * np.arange(16.0))
