"""xlabind.ops.map_coordinates of orders 2 to 5 and xlabind.ops.spline_filter
against scipy.ndimage: every mode (jax's reading of the names: constant and
wrap are SciPy's grid-constant and grid-wrap), 1-D to 3-D, float32 and
float64; derivatives in both arguments, vmap, jit, NaN and infinite
coordinates, the prefilter's transpose."""

import cases
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.ndimage as ndimage
from jax.test_util import check_grads
from map_coordinates_table import SCIPY_MODE

from xlabind.ops import map_coordinates, spline_filter

jax.config.update("jax_enable_x64", True)

ORDERS = [2, 3, 4, 5]
SHAPES = [(30,), (24, 26), (20, 21, 22)]


def tolerance(dtype):
    return dict(rtol=1e-12, atol=1e-12) if dtype == np.float64 else dict(rtol=2e-5, atol=2e-5)


def points(shape, count, seed, low=-4.0, beyond=4.0):
    """Coordinates inside, near and past every edge, and on nodes."""
    rng = np.random.default_rng(seed)
    coords = [rng.uniform(low, n - 1 + beyond, count) for n in shape]
    for c, n in zip(coords, shape):
        c[:4] = [0.0, n - 1.0, 1.0, np.floor(n / 2)]  # nodes, the edges among them
        c[4:6] = [-0.5, n - 0.5]  # half-way past the edges
    return coords


def batched(fn, cases):
    """{case: fn(*case)} for every case, compiled as one program (one
    compilation instead of one per case)."""
    return jax.jit(lambda: {str(case): fn(*case) for case in cases})()


FILTER_MODES = ["mirror", "reflect", "wrap"]


@pytest.mark.parametrize("shape", SHAPES)
def test_spline_filter_is_scipys(shape):
    inputs = {order: np.random.default_rng(order).normal(size=shape) for order in ORDERS}
    axis = len(shape) - 1
    cases = [(order, mode) for order in ORDERS for mode in FILTER_MODES]
    whole = batched(
        lambda order, mode: spline_filter(jnp.asarray(inputs[order]), order, mode), cases
    )
    # One axis at a time, as scipy.ndimage.spline_filter1d.
    one_axis = batched(
        lambda order, mode: spline_filter(jnp.asarray(inputs[order]), order, mode, axes=axis), cases
    )
    for order, mode in cases:
        x = inputs[order]
        np.testing.assert_allclose(
            whole[str((order, mode))],
            ndimage.spline_filter(x, order, mode=SCIPY_MODE[mode]),
            rtol=1e-12,
            atol=1e-12,
            err_msg=f"order {order}, {mode}",
        )
        np.testing.assert_allclose(
            one_axis[str((order, mode))],
            ndimage.spline_filter1d(x, order, axis=axis, mode=SCIPY_MODE[mode]),
            rtol=1e-12,
            atol=1e-12,
            err_msg=f"order {order}, {mode}, axis {axis}",
        )


@pytest.mark.parametrize("order", ORDERS)
def test_short_lines_interpolate_their_samples(order):
    # The coefficients' spline goes through the samples, also where SciPy
    # 1.17 (which misreads one term of the reflect boundary on short lines)
    # does not: checked against the samples themselves.
    lines = {n: np.random.default_rng(n).normal(size=n) for n in (1, 2, 3, 5, 8)}
    cases = [(mode, n) for mode in FILTER_MODES for n in lines]
    got = batched(
        lambda mode, n: map_coordinates(
            jnp.asarray(lines[n]), [jnp.arange(n, dtype=jnp.float64)], order, mode
        ),
        cases,
    )
    for mode, n in cases:
        np.testing.assert_allclose(
            got[str((mode, n))], lines[n], rtol=1e-12, atol=1e-12, err_msg=f"{mode}, {n} samples"
        )


@pytest.mark.parametrize("order, mode", cases.product("adjoint", ORDERS, FILTER_MODES, sampled=4))
def test_the_filter_transpose_is_its_adjoint(order, mode):
    rng = np.random.default_rng(7)
    # Past 8 lines an axis the CPU filters 8 side by side (rows of the last
    # axis, or adjacent lines of an earlier one), the rest one at a time.
    for shape in [(1,), (2,), (5,), (3, 4), (2, 3, 6), (17, 10), (9, 11, 7)]:
        x, y = rng.normal(size=shape), rng.normal(size=shape)
        f = lambda v: spline_filter(v, order, mode)
        (ft_y,) = jax.linear_transpose(f, jnp.asarray(x))(jnp.asarray(y))
        np.testing.assert_allclose(
            np.vdot(f(jnp.asarray(x)), y), np.vdot(x, ft_y), rtol=1e-12, atol=1e-12
        )


def test_scipys_grid_names_are_accepted():
    grid = jnp.asarray(np.random.default_rng(0).normal(size=(12, 13)))
    coords = [jnp.asarray(c) for c in points((12, 13), 50, seed=1)]
    for ours, same in [
        ("constant", "grid-constant"),
        ("wrap", "grid-wrap"),
        ("reflect", "grid-mirror"),
    ]:
        np.testing.assert_array_equal(
            map_coordinates(grid, coords, 3, ours), map_coordinates(grid, coords, 3, same)
        )


@pytest.mark.parametrize("order", ORDERS)
def test_prefilter_false_interpolates_coefficients(order):
    grid = jnp.asarray(np.random.default_rng(3).normal(size=(9, 10)))
    coords = [jnp.asarray(c) for c in points((9, 10), 60, seed=3)]
    coefficients = spline_filter(grid, order, "mirror")
    np.testing.assert_allclose(
        map_coordinates(coefficients, coords, order, "mirror", prefilter=False),
        map_coordinates(grid, coords, order, "mirror"),
        rtol=1e-12,
        atol=1e-12,
    )
    np.testing.assert_allclose(
        map_coordinates(coefficients, coords, order, "mirror", prefilter=False),
        ndimage.map_coordinates(
            np.asarray(coefficients),
            [np.asarray(c) for c in coords],
            order=order,
            mode="mirror",
            prefilter=False,
        ),
        rtol=1e-12,
        atol=1e-12,
    )


@pytest.mark.parametrize(
    "order, mode", cases.product("second order", ORDERS, sorted(SCIPY_MODE), sampled=6)
)
def test_gradients_in_both_arguments_to_second_order(order, mode):
    rng = np.random.default_rng(order)
    grid = jnp.asarray(rng.normal(size=(7, 8)))
    # Away from the nodes and the knots of even orders, where the spline's
    # derivatives of order k and up jump.
    coords = [jnp.asarray(rng.uniform(-2.0, n + 1.0, 6).round() + 0.27) for n in (7, 8)]
    # Jitted: check_grads calls it many times, each an executable already built.
    f = jax.jit(lambda g, *c: jnp.sum(jnp.sin(map_coordinates(g, list(c), order, mode, cval=0.5))))
    # Forward over forward to second order in both arguments; reverse mode to
    # first order in both, and to second order in each alone (a Hessian).
    check_grads(f, (grid, *coords), order=2, modes=("fwd",), atol=1e-6, rtol=1e-6)
    check_grads(f, (grid, *coords), order=1, modes=("rev",), atol=1e-6, rtol=1e-6)
    check_grads(lambda *c: f(grid, *c), coords, order=2, modes=("rev",), atol=1e-6, rtol=1e-6)
    check_grads(lambda g: f(g, *coords), (grid,), order=2, modes=("rev",), atol=1e-6, rtol=1e-6)


COMPOSITIONS = {
    "hessian": lambda f, argnums: jax.hessian(f, argnums),
    "jacfwd(jacrev)": lambda f, argnums: jax.jacfwd(jax.jacrev(f, argnums), argnums),
    "jacrev(jacrev)": lambda f, argnums: jax.jacrev(jax.jacrev(f, argnums), argnums),
    "jacrev(jacfwd)": lambda f, argnums: jax.jacrev(jax.jacfwd(f, argnums), argnums),
}


@pytest.mark.parametrize(
    "order, mode, compositions",
    [
        (2, "mirror", ["hessian"]),
        (3, "constant", list(COMPOSITIONS)),
        (4, "mirror", list(COMPOSITIONS)),
        (5, "constant", ["hessian", "jacrev(jacrev)"]),
    ],
)
def test_second_derivatives_over_grid_and_coordinates_in_every_composition(
    order, mode, compositions
):
    # Reverse over anything transposes the grid term into the scatter, which
    # must be differentiable in the coordinates itself. Forward over forward
    # (which never transposes) is the reference. Every composition for an odd
    # and an even degree (whose nodes sit differently); the Hessian for all.
    rng = np.random.default_rng(order)
    grid = jnp.asarray(rng.normal(size=(6, 7)))
    coords = jnp.asarray(rng.uniform(-1.0, 6.0, (2, 5)).round() + 0.31)

    def f(g, c):
        return jnp.sum(jnp.sin(map_coordinates(g, [c[0], c[1]], order, mode, cval=0.5)))

    want = jax.jit(jax.jacfwd(jax.jacfwd(f, (0, 1)), (0, 1)))(grid, coords)
    for name in compositions:
        got = jax.jit(COMPOSITIONS[name](f, (0, 1)))(grid, coords)
        for row in range(2):
            for column in range(2):
                np.testing.assert_allclose(
                    got[row][column],
                    want[row][column],
                    rtol=1e-10,
                    atol=1e-10,
                    err_msg=f"{name}[{row}][{column}]",
                )
    # Under vmap too.
    batched_hessian = jax.vmap(jax.hessian(f, (0, 1)), in_axes=(None, 0))
    batched = jax.jit(batched_hessian)(grid, jnp.stack([coords] * 2))
    np.testing.assert_allclose(batched[0][1][1], want[0][1], rtol=1e-10, atol=1e-10)


def test_third_derivatives_through_the_scatter():
    # Reverse three times: the scatter's derivative in the coordinates is
    # itself differentiable (its own scatter, one degree steeper).
    grid = jnp.asarray(np.random.default_rng(5).normal(size=(9,)))
    f = lambda g, c: jnp.sum(map_coordinates(g, [c], 5, "mirror") ** 3)
    c = jnp.array([2.3, 4.6])
    third = jax.jit(jax.jacrev(jax.jacrev(jax.jacrev(f, 1), 0), 1))(grid, c)
    want = jax.jit(jax.jacfwd(jax.jacfwd(jax.jacfwd(f, 1), 0), 1))(grid, c)
    np.testing.assert_allclose(third, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("order", ORDERS)
def test_the_coordinate_derivative_is_the_splines(order):
    # sin sampled finely: the spline's derivative is cos to the spline's accuracy.
    xs = np.linspace(0.0, 6.0, 241)  # 0.025 apart
    wave = jnp.asarray(np.sin(xs))
    at = jnp.asarray([30.3, 101.7, 170.1])
    slope = jax.vmap(jax.grad(lambda t: map_coordinates(wave, [t[None]], order, "mirror")[0]))
    np.testing.assert_allclose(
        np.asarray(slope(at)) / 0.025, np.cos(np.asarray(at) * 0.025), atol=1e-4
    )


def test_vmap_over_grids_and_coordinates_is_one_call_each_and_right():
    rng = np.random.default_rng(5)
    grids = jnp.asarray(rng.normal(size=(3, 10, 11)))
    per_grid = [points((10, 11), 40, seed=s) for s in range(3)]
    coords = [jnp.asarray(np.stack([p[a] for p in per_grid])) for a in range(2)]
    f = lambda g, c0, c1: map_coordinates(g, [c0, c1], 3, "mirror")
    got = jax.jit(jax.vmap(f))(grids, *coords)
    for b in range(3):
        want = ndimage.map_coordinates(
            np.asarray(grids[b]), [np.asarray(c[b]) for c in coords], order=3, mode="mirror"
        )
        np.testing.assert_allclose(got[b], want, rtol=1e-12, atol=1e-12)
    text = jax.jit(jax.vmap(f)).lower(grids, *coords).as_text()
    assert text.count("@xlabind_spline_filter(") == 1
    assert text.count("@xlabind_map_coordinates(") == 1
    # The gradient under vmap: one transposed filter for the batch.
    g = jax.vmap(jax.grad(lambda g, c0, c1: jnp.sum(f(g, c0, c1) ** 2)))(grids, *coords)
    assert g.shape == grids.shape and np.all(np.isfinite(g))


@pytest.mark.parametrize("order", ORDERS)
def test_zero_points(order):
    grid = jnp.ones((4, 5))
    empty = jnp.zeros((0,))
    assert map_coordinates(grid, [empty, empty], order).shape == (0,)
    g = jax.grad(lambda g: jnp.sum(map_coordinates(g, [empty, empty], order)))(grid)
    np.testing.assert_array_equal(g, np.zeros((4, 5)))


@pytest.mark.parametrize("order", ORDERS)
def test_nan_and_infinite_coordinates(order):
    # The trust table: NaN -> NaN; +-inf -> the edge (nearest), outside
    # (constant: cval), NaN in the periodic and symmetric modes.
    grid = jnp.asarray(np.random.default_rng(0).normal(size=10))
    c = jnp.asarray([np.nan, np.inf, -np.inf, 4.5])
    for mode in ("mirror", "reflect", "wrap"):
        v = map_coordinates(grid, [c], order, mode)
        assert np.isnan(v[:3]).all() and np.isfinite(v[3]), (mode, v)
    v = map_coordinates(grid, [c], order, "constant", cval=2.0)
    assert np.isnan(v[0]) and v[1] == 2.0 and v[2] == 2.0
    v = map_coordinates(grid, [c], order, "nearest")
    np.testing.assert_allclose(
        v[1:3],
        ndimage.map_coordinates(np.asarray(grid), [[1e6, -1e6]], order=order, mode="nearest"),
        rtol=1e-12,
    )
    assert np.isnan(v[0])
    g = jax.grad(lambda g: jnp.sum(map_coordinates(g, [c[3:]], order, "mirror")))(grid)
    assert np.all(np.isfinite(g))


def test_spline_filter_dtypes_axes_and_errors():
    x = np.random.default_rng(0).normal(size=(6, 7))
    np.testing.assert_allclose(
        spline_filter(jnp.asarray(x, jnp.float32), 3),
        ndimage.spline_filter(x, 3, mode="mirror"),
        rtol=2e-5,
        atol=2e-5,
    )
    ints = np.arange(12).reshape(3, 4)
    np.testing.assert_allclose(
        spline_filter(jnp.asarray(ints), 3),
        ndimage.spline_filter(ints.astype(float), 3),
        rtol=1e-12,
    )
    z = x + 1j * x[::-1]
    np.testing.assert_allclose(
        spline_filter(jnp.asarray(z), 4, "wrap"),
        ndimage.spline_filter(z.real, 4, mode="grid-wrap")
        + 1j * ndimage.spline_filter(z.imag, 4, mode="grid-wrap"),
        rtol=1e-12,
        atol=1e-12,
    )
    np.testing.assert_array_equal(spline_filter(jnp.asarray(x), 1), x)  # nothing to filter
    np.testing.assert_allclose(
        spline_filter(jnp.asarray(x), 3, axes=(0,)),
        ndimage.spline_filter1d(x, 3, axis=0),
        rtol=1e-12,
    )
    with pytest.raises(NotImplementedError, match=r"spline_filter: order must be 0 to 5, got 6"):
        spline_filter(jnp.asarray(x), 6)
    with pytest.raises(NotImplementedError, match=r"spline_filter: mode must be one of"):
        spline_filter(jnp.asarray(x), 3, "wrap-around")
    with pytest.raises(
        ValueError,
        match=r"spline_filter: axis 2 is out of range for an array "
        r"of 2 dimensions",
    ):
        spline_filter(jnp.asarray(x), 3, axes=2)
    with pytest.raises(ValueError, match=r"axes \(0, -2\) name an axis twice"):
        spline_filter(jnp.asarray(x), 3, axes=(0, -2))
    with pytest.raises(NotImplementedError, match=r"order 3 needs a float32 or float64 grid"):
        map_coordinates(jnp.asarray(ints), [jnp.ones(2)] * 2, 3)


def test_axes_given_as_an_array_or_not_as_ints():
    x = jnp.arange(12.0).reshape(3, 4)
    np.testing.assert_allclose(spline_filter(x, axes=np.array([0, 1])), spline_filter(x))
    for axes in (1.0, "x"):
        with pytest.raises(TypeError, match=r"spline_filter: axes must be an int or a sequence"):
            spline_filter(x, axes=axes)
