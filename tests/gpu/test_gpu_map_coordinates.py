"""xlabind.ops.map_coordinates on a real GPU (its CUDA kernels): values against
the CPU kernels and jax's own, both gradients, the atomic scatter-add under
heavy collisions, vmap, and calls inside loops XLA may capture in a CUDA
graph. Skipped without a CUDA device; tools/device_check.py runs this file on the
GPU machine."""

import jax
import jax.numpy as jnp
import map_coordinates_table as table
import numpy as np
import pytest
from gpu_devices import on_cpu, on_gpu, requires_gpu
from jax.scipy.ndimage import map_coordinates as reference

from xlabind._runtime import extension as _extension
from xlabind.ops import map_coordinates

jax.config.update("jax_enable_x64", True)
pytestmark = requires_gpu

MODES = ["constant", "nearest", "wrap", "mirror", "reflect"]
SHAPES = [(11,), (6, 7), (5, 6, 7), (3, 4, 3, 5)]


def problem(shape, dtype, points=(300, 70), seed=0):
    rng = np.random.default_rng(seed)
    grid = rng.normal(size=shape).astype(dtype)
    coords = [rng.uniform(-2.5, n + 1.5, size=points).astype(dtype) for n in shape]
    coords[0][0, :3] = (2.0, 1.5, -0.5)  # on a grid line, and rounding ties
    return grid, coords


def both(grid, coords):
    """The same arrays on the GPU and on the CPU."""
    return (
        (on_gpu(grid), [on_gpu(c) for c in coords]),
        (on_cpu(grid), [on_cpu(c) for c in coords]),
    )


def tolerance(dtype):
    return dict(rtol=2e-6, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)


def test_the_cuda_kernels_are_loaded():
    assert not _extension.UNAVAILABLE, _extension.UNAVAILABLE


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", SHAPES)
def test_values_match_the_cpu_and_jax(shape, mode, order, dtype):
    (g, c), (g_cpu, c_cpu) = both(*problem(shape, dtype))
    f = jax.jit(lambda g, c: map_coordinates(g, c, order, mode, cval=-1.25))
    got = f(g, c)
    assert got.devices() == g.devices() and got.dtype == dtype
    np.testing.assert_allclose(got, f(g_cpu, c_cpu), **tolerance(dtype))
    np.testing.assert_allclose(got, reference(g, c, order, mode, -1.25), **tolerance(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", MODES)
def test_gradients_match_the_cpu(mode, dtype):
    grid, coords = problem((5, 6, 7), dtype)
    coords = [c + dtype(0.123) for c in coords]  # away from grid lines
    (g, c), (g_cpu, c_cpu) = both(grid, coords)
    loss = lambda g, c0, c: jnp.sum(jnp.sin(map_coordinates(g, [c0, *c], 1, mode, 0.5)))
    grads = jax.jit(jax.grad(loss, argnums=(0, 1)))
    # The grid gradient is a scatter-add: CUDA's atomics add a node's terms in whatever order
    # the threads arrive, so a float32 sum differs from the CPU's fixed order by a few ulps of
    # the (large) sum: 2.2e-6 relative measured on the H200.
    tol = dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else tolerance(dtype)
    for got, want in zip(grads(g, c[0], c[1:]), grads(g_cpu, c_cpu[0], c_cpu[1:])):
        np.testing.assert_allclose(got, want, **tol)


def test_scatter_add_with_many_points_on_few_cells():
    # A million points on a 4x4 grid: every cell's gradient sums ~10^5 atomic adds.
    rng = np.random.default_rng(1)
    grid = np.zeros((4, 4))
    coords = [rng.uniform(0.0, 3.0, 10**6) for _ in range(2)]
    (g, c), (g_cpu, c_cpu) = both(grid, coords)
    grad = jax.jit(jax.grad(lambda g, c: jnp.sum(map_coordinates(g, c, 1))))
    got = grad(g, c)
    np.testing.assert_allclose(got, grad(g_cpu, c_cpu), rtol=1e-10)
    np.testing.assert_allclose(jnp.sum(got), 10**6, rtol=1e-10)  # the weights sum to 1
    got32 = grad(g.astype(np.float32), [x.astype(np.float32) for x in c])
    np.testing.assert_allclose(got32, got, rtol=1e-3)


def test_vmap_is_one_kernel_call_on_the_gpu():
    grid, coords = problem((5, 6, 7), np.float64)
    grids = on_gpu(np.stack([grid, 2 * grid, -grid]))
    c = [on_gpu(x) for x in coords]
    f = jax.jit(jax.vmap(lambda g: map_coordinates(g, c, 1, "mirror")))
    np.testing.assert_allclose(
        f(grids), jax.vmap(lambda g: reference(g, c, 1, "mirror"))(grids), **tolerance(np.float64)
    )
    assert f.lower(grids).as_text().count("@xlabind_map_coordinates(") == 1


def test_calls_inside_a_loop_repeat_exactly():
    # XLA may capture the loop body (the kernels are command-buffer compatible)
    # in a CUDA graph; replays must compute what single calls do.
    grid, coords = problem((16, 16, 16), np.float32)
    g, c = on_gpu(grid), [on_gpu(x) for x in coords]
    step = lambda g: g + 1e-3 * jax.grad(lambda g: jnp.sum(map_coordinates(g, c, 1)))(g)

    @jax.jit
    def loop(g):
        return jax.lax.fori_loop(0, 5, lambda _, g: step(g), g)

    expected = g
    for _ in range(5):
        expected = jax.jit(step)(expected)
    # (float atomics add in any order: close, not bit-equal)
    np.testing.assert_allclose(loop(g), expected, rtol=1e-5, atol=1e-6)


# -- every input (the CPU's tests/ops/test_map_coordinates_domain.py, on the GPU) --


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("mode", MODES)
def test_every_input_follows_the_table_on_the_gpu(mode, order):
    grid = on_gpu(np.asarray(table.GRID))
    got = map_coordinates(grid, [on_gpu(np.asarray(table.EXTREME))], order, mode, cval=table.CVAL)
    np.testing.assert_array_equal(np.asarray(got), [table.expected(mode, c) for c in table.EXTREME])
    finite = on_gpu(np.asarray(table.FINITE))
    np.testing.assert_allclose(
        map_coordinates(grid, [finite], order, mode, cval=table.CVAL),
        reference(grid, [finite], order, mode, cval=table.CVAL),
        rtol=1e-12,
        atol=1e-12,
    )


@pytest.mark.parametrize("mode", MODES)
def test_nan_and_infinite_coordinates_in_gradients_on_the_gpu(mode):
    grid = on_gpu(np.asarray(table.GRID))
    coords = on_gpu(np.asarray([np.nan, np.inf, -np.inf, 1.5]))
    f = lambda g, c: map_coordinates(g, [c], 1, mode, table.CVAL).sum()
    g_gpu = jax.grad(f, argnums=(0, 1))(grid, coords)
    g_cpu = jax.grad(f, argnums=(0, 1))(on_cpu(np.asarray(table.GRID)), on_cpu(np.asarray(coords)))
    for a, b in zip(g_gpu, g_cpu):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_zero_points_and_zero_batches_on_the_gpu():
    grid = on_gpu(np.asarray(table.GRID))
    assert map_coordinates(grid, [on_gpu(np.zeros(0))], 1).shape == (0,)
    assert jax.vmap(lambda c: map_coordinates(grid, [c], 1))(on_gpu(np.zeros((0, 4)))).shape == (
        0,
        4,
    )
    np.testing.assert_array_equal(
        jax.grad(lambda g: map_coordinates(g, [on_gpu(np.zeros(0))], 1).sum())(grid), np.zeros(5)
    )


# -- orders 2 to 5: B-splines (the prefilter's CUDA kernels, then the same
# interpolation kernels), against SciPy and the CPU kernels.
SCIPY_MODE = {
    "constant": "grid-constant",
    "nearest": "nearest",
    "mirror": "mirror",
    "reflect": "reflect",
    "wrap": "grid-wrap",
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("order", [2, 3, 4, 5])
@pytest.mark.parametrize("mode", MODES)
def test_spline_values_match_scipy_and_the_cpu(mode, order, dtype):
    import scipy.ndimage

    rng = np.random.default_rng(order)
    grid = rng.normal(size=(24, 25, 26)).astype(dtype)
    coords = [rng.uniform(-3.0, n + 2.0, 2000).astype(dtype) for n in grid.shape]
    (g, c), (g_cpu, c_cpu) = both(grid, coords)
    f = jax.jit(lambda g, c: map_coordinates(g, c, order, mode, cval=0.75))
    got = f(g, c)
    assert got.devices() == g.devices()
    # float32: up to 216 terms (order 5 in 3-D) summed in another order than
    # the CPU's; coefficients of noise grow to ~10: a few 1e-6 apart (measured).
    close = tolerance(dtype) if dtype == np.float64 else dict(rtol=1e-5, atol=5e-5)
    np.testing.assert_allclose(got, f(g_cpu, c_cpu), **close)
    want = scipy.ndimage.map_coordinates(
        grid.astype(np.float64),
        [x.astype(np.float64) for x in coords],
        order=order,
        mode=SCIPY_MODE[mode],
        cval=0.75,
    )
    np.testing.assert_allclose(
        got, want, **(tolerance(dtype) if dtype == np.float64 else dict(rtol=2e-4, atol=2e-4))
    )


@pytest.mark.parametrize("order", [2, 3, 5])
@pytest.mark.parametrize("mode", MODES)
def test_spline_gradients_match_the_cpu(mode, order):
    grid, coords = problem((9, 10), np.float64, points=(4, 50), seed=order)
    coords = [c + 0.123 for c in coords]
    (g, c), (g_cpu, c_cpu) = both(grid, coords)
    loss = lambda g, c0, c1: jnp.sum(jnp.sin(map_coordinates(g, [c0, c1], order, mode, 0.5)))
    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
    for got, want in zip(grads(g, *c), grads(g_cpu, *c_cpu)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_spline_filter_and_its_transpose_match_the_cpu():
    from xlabind.ops import spline_filter

    x = np.random.default_rng(0).normal(size=(3, 40, 33))
    for dtype in (np.float32, np.float64):
        for mode in ("mirror", "reflect", "wrap"):
            f = jax.jit(lambda v, mode=mode: spline_filter(v, 4, mode, axes=(1, 2)))
            np.testing.assert_allclose(
                f(on_gpu(x.astype(dtype))), f(on_cpu(x.astype(dtype))), **tolerance(dtype)
            )
            t = jax.jit(jax.linear_transpose(f, on_cpu(x.astype(dtype))))
            tg = jax.jit(jax.linear_transpose(f, on_gpu(x.astype(dtype))))
            np.testing.assert_allclose(
                tg(on_gpu(x.astype(dtype)))[0], t(on_cpu(x.astype(dtype)))[0], **tolerance(dtype)
            )
