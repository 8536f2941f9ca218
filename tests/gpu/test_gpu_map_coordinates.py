"""What only the CUDA kernels of xlabind.ops.map_coordinates have, on a real
GPU: the atomic scatter-add under heavy collisions, calls inside loops XLA
may capture in a CUDA graph, NaN gradients and spline_filter with its
transpose as the CPU's. The contract every
implementation holds (values at every order, mode, dtype and rank, both
gradients, no points, vmap) is tests/ops/test_map_coordinates.py, which
runs its GPU cases on a GPU. Skipped without a CUDA device;
tools/device_check.py runs this file on the GPU machine."""

import jax
import jax.numpy as jnp
import map_coordinates_table as table
import numpy as np
import pytest
from gpu_devices import on_cpu, on_gpu, requires_gpu

from xlabind._runtime import extension as _extension
from xlabind.ops import map_coordinates

jax.config.update("jax_enable_x64", True)
pytestmark = requires_gpu

MODES = table.MODES


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


# -- every input (tests/ops/test_map_coordinates_domain.py's table, whose GPU
# cases run the values on a GPU) --------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_nan_and_infinite_coordinates_in_gradients_on_the_gpu(mode):
    grid = on_gpu(np.asarray(table.GRID))
    coords = on_gpu(np.asarray([np.nan, np.inf, -np.inf, 1.5]))
    f = lambda g, c: map_coordinates(g, [c], 1, mode, table.CVAL).sum()
    g_gpu = jax.grad(f, argnums=(0, 1))(grid, coords)
    g_cpu = jax.grad(f, argnums=(0, 1))(on_cpu(np.asarray(table.GRID)), on_cpu(np.asarray(coords)))
    for a, b in zip(g_gpu, g_cpu):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


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
