"""xlabind.ops on sharded arrays (8 virtual CPU devices), Auto and Explicit
mesh axes: every split the arguments have is kept, with no collective in
the compiled program where jax's own map_coordinates needs none."""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
)

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from xlabind.ops import map_coordinates, spline_filter

COLLECTIVES = re.compile(r"all-gather|all-reduce|all-to-all|collective-permute|reduce-scatter")


@pytest.fixture(params=["auto", "explicit"])
def axis_type(request):
    return {"auto": AxisType.Auto, "explicit": AxisType.Explicit}[request.param]


def make_mesh(axis_type, shape=(8,), names=("d",)):
    return jax.make_mesh(shape, names, axis_types=(axis_type,) * len(shape))


def collectives(f, *args) -> list[str]:
    text = jax.jit(f).lower(*args).compile().as_text()
    return [line.strip()[:120] for line in text.splitlines() if COLLECTIVES.search(line)]


def split(mesh, x, *spec):
    return jax.device_put(jnp.asarray(x), NamedSharding(mesh, P(*spec)))


def spec_of(y) -> tuple:
    spec = tuple(y.sharding.spec)
    while spec and spec[-1] is None:
        spec = spec[:-1]
    return spec


def test_spline_filter_keeps_the_axes_it_does_not_filter(axis_type):
    mesh = make_mesh(axis_type)
    x = np.random.default_rng(0).normal(size=(16, 12)).astype(np.float32)
    rows = split(mesh, x, "d")
    with jax.set_mesh(mesh):
        f = jax.jit(lambda x: spline_filter(x, 3, axes=(1,)))
        y = f(rows)
        assert collectives(f, rows) == []
    assert spec_of(y) == ("d",)
    np.testing.assert_allclose(y, spline_filter(x, 3, axes=(1,)), rtol=1e-6, atol=1e-6)


def test_spline_filter_along_a_split_axis_gathers_that_axis_only(axis_type):
    mesh = make_mesh(axis_type, (2, 4), ("a", "b"))
    x = np.random.default_rng(1).normal(size=(4, 16)).astype(np.float32)
    both = split(mesh, x, "a", "b")
    with jax.set_mesh(mesh):
        y = jax.jit(lambda x: spline_filter(x, 3, axes=(1,)))(both)
    np.testing.assert_allclose(y, spline_filter(x, 3, axes=(1,)), rtol=1e-6, atol=1e-6)
    if axis_type == AxisType.Explicit:  # typed as it came
        assert spec_of(y) == ("a", "b")


@pytest.mark.parametrize("order", [2, 3, 5])
def test_the_prefilter_under_vmap_keeps_a_split_batch(axis_type, order):
    mesh = make_mesh(axis_type)
    rng = np.random.default_rng(order)
    grids = rng.normal(size=(8, 10, 10)).astype(np.float32)
    points = rng.uniform(0, 9, size=(8, 2, 64)).astype(np.float32)

    def f(gs, ps):
        return jax.vmap(lambda g, p: map_coordinates(g, [p[0], p[1]], order, "mirror"))(gs, ps)

    args = split(mesh, grids, "d"), split(mesh, points, "d")
    with jax.set_mesh(mesh):
        y = jax.jit(f)(*args)
        assert collectives(f, *args) == []
    assert spec_of(y) == ("d",)
    np.testing.assert_allclose(y, f(grids, points), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("order", [1, 3])
def test_per_set_grid_gradients_under_vmap_over_split_coordinate_sets(axis_type, order):
    """One grid, coordinate sets split over the devices, jax.vmap of each
    set's grid gradient: order 3's prefilter (whole, on no split operand)
    is typed on the mesh like jax's own ops, so vmap can split its batch."""
    mesh = make_mesh(axis_type)
    rng = np.random.default_rng(order)
    grid = jnp.asarray(rng.normal(size=(16, 16)), jnp.float32)
    sets = rng.uniform(-1, 17, size=(2, 8, 64)).astype(np.float32)

    def f(g, c):
        per_set = lambda c: jax.grad(lambda g: map_coordinates(g, list(c), order, "mirror").sum())
        return jax.vmap(lambda c: per_set(c)(g), in_axes=1)(c)

    with jax.set_mesh(mesh):
        y = jax.jit(f)(grid, split(mesh, sets, None, "d"))
    np.testing.assert_allclose(y, jax.jit(f)(grid, sets), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec", [("d",), (None, "d")], ids=["rows", "columns"])
@pytest.mark.parametrize("order", [1, 3])
def test_2d_coordinates_keep_their_split(axis_type, spec, order):
    """Image resampling: one (H, W) array of coordinates per grid axis."""
    mesh = make_mesh(axis_type)
    rng = np.random.default_rng(2)
    grid = rng.normal(size=(20, 24)).astype(np.float32)
    ys, xs = (rng.uniform(-2, n + 1, size=(16, 32)).astype(np.float32) for n in grid.shape)

    def f(g, ys, xs):
        return map_coordinates(g, [ys, xs], order, "reflect")

    def theirs(g, ys, xs):
        return jax.scipy.ndimage.map_coordinates(g, [ys, xs], 1, "reflect")

    args = jnp.asarray(grid), split(mesh, ys, *spec), split(mesh, xs, *spec)
    with jax.set_mesh(mesh):
        y = jax.jit(f)(*args)
        assert collectives(f, *args) == []
        if order == 1 and axis_type == AxisType.Auto:  # (jax's fails on Explicit axes)
            assert collectives(theirs, *args) == []  # the anchor: jax's own needs none
            np.testing.assert_allclose(y, jax.jit(theirs)(*args), rtol=1e-5, atol=1e-5)
    assert spec_of(y) == spec
    np.testing.assert_allclose(y, f(grid, ys, xs), rtol=1e-5, atol=1e-5)


def test_2d_coordinates_split_along_both_axes_are_typed_so():
    mesh = make_mesh(AxisType.Explicit, (2, 4), ("a", "b"))
    rng = np.random.default_rng(3)
    grid = jnp.asarray(rng.normal(size=(20, 20)).astype(np.float32))
    ys, xs = (
        split(mesh, rng.uniform(0, 19, size=(8, 16)).astype(np.float32), "a", "b") for _ in "yx"
    )
    with jax.set_mesh(mesh):
        y = jax.jit(lambda g, a, b: map_coordinates(g, [a, b], 1, "nearest"))(grid, ys, xs)
    assert spec_of(y) == ("a", "b")


def test_ops_take_no_failure_collective_in_a_branch_only_some_devices_take():
    """jax's map_coordinates runs this; a collective in the branch would
    leave the devices that skip it waiting (XLA aborts after 40 s)."""
    mesh = make_mesh(AxisType.Explicit)
    grid = jnp.arange(100.0, dtype=jnp.float32).reshape(10, 10)
    points = split(mesh, np.full((2, 64), 4.5, np.float32), None, "d")

    def per_device(p):
        index = jax.lax.axis_index("d")
        return jax.lax.cond(
            index % 2 == 0,
            lambda: map_coordinates(grid, [p[0], p[1]], 3, "mirror"),
            lambda: jnp.zeros_like(p[0]),
        )

    f = jax.jit(jax.shard_map(per_device, mesh=mesh, in_specs=P(None, "d"), out_specs=P("d")))
    with jax.set_mesh(mesh):
        assert collectives(f, points) == []  # before it runs: else XLA aborts
        y = np.asarray(f(points)).reshape(8, 8)
    np.testing.assert_allclose(y[::2], 49.5, rtol=1e-5)
    np.testing.assert_array_equal(y[1::2], 0)


@pytest.mark.parametrize("mesh_set", [True, False], ids=["set_mesh", "no mesh set"])
@pytest.mark.parametrize(
    "what", ["with a rule", "without a rule", "linear, differentiated", "map_coordinates"]
)
def test_nested_shard_map_over_the_context_mesh(axis_type, what, mesh_set):
    """The inner shard_map over the context's abstract mesh, as jax requires."""
    import xlabind

    mesh = make_mesh(axis_type, (2, 4), ("a", "b"))
    twice = lambda x: 2 * np.asarray(x)
    double = xlabind.linear(twice, twice, lambda x: x, sharding_rule="n -> n")
    grid = jnp.arange(25.0, dtype=jnp.float32).reshape(5, 5)
    inner_fn = {
        "with a rule": double,
        "without a rule": xlabind.callback(twice, lambda x: x),
        "linear, differentiated": jax.grad(lambda y: jnp.sum(double(y) * y)),
        "map_coordinates": lambda y: map_coordinates(grid, [y, y], 1, "nearest"),
    }[what]
    x_np = np.linspace(0, 4, 16, dtype=np.float32)
    x = split(mesh, x_np, ("a", "b"))

    def outer(xs):
        inner = jax.shard_map(
            inner_fn,
            mesh=jax.sharding.get_abstract_mesh(),
            in_specs=P("b"),
            out_specs=P("b"),
            axis_names={"b"},
        )
        return inner(xs)

    f = jax.jit(
        jax.shard_map(outer, mesh=mesh, in_specs=P("a"), out_specs=P("a"), axis_names={"a"})
    )
    if mesh_set:
        with jax.set_mesh(mesh):
            y = f(x)
    else:
        # Lowered with no concrete mesh in the context: the inner shard_map's
        # lowering context keeps the abstract mesh, whose .devices raises.
        y = f(x)
    want = {"map_coordinates": 6 * x_np, "linear, differentiated": 4 * x_np}.get(what, 2 * x_np)
    np.testing.assert_allclose(y, want, rtol=1e-5)


# -- the same programs lowered for a TPU (issue 72, items 4 and 5) -------------
# Off a TPU, CPU programs lower as the platform table's TPU record says (the
# ops' JAX formulation, Pallas kernels interpreted: tests/support/tpu_lowering.py).


@pytest.fixture
def as_on_a_tpu():
    from tpu_lowering import tpu_rule_for_cpu_programs

    with tpu_rule_for_cpu_programs():
        yield


def _warp(grid, c):
    return map_coordinates(grid, list(c), 1, "wrap")


@pytest.mark.usefixtures("as_on_a_tpu")
def test_a_tpu_program_places_the_formulation_on_each_devices_points(axis_type):
    mesh = make_mesh(axis_type)
    grid = jnp.arange(512.0).reshape(8, 8, 8)
    coords = np.random.default_rng(0).uniform(-2, 10, (3, 1024)).astype(np.float32)
    want = jax.scipy.ndimage.map_coordinates(grid, list(coords), 1, "wrap")
    want_grad = jax.grad(
        lambda g: jax.scipy.ndimage.map_coordinates(g, list(coords), 1, "wrap").sum()
    )(grid)
    c = split(mesh, coords, None, "d")
    with jax.set_mesh(mesh):
        values = jax.jit(_warp)(grid, c)
        grad = jax.jit(jax.grad(lambda g, c: _warp(g, c).sum()))(grid, c)
    np.testing.assert_allclose(values, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-4)
    # Each device interpolates its own points: nothing gathers the coordinates.
    assert collectives(_warp, grid, c) == []
