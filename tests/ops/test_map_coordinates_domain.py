"""xlabind.ops.map_coordinates is total: every coordinate has the value of the
the interpolation guide's table ("Every coordinate has a value"), the same in the CPU's
scalar and vector kernels (tests/test_gpu_map_coordinates.py checks the CUDA
kernels against this file's EXPECTED on a GPU):

* finite coordinates where jax's int32 index arithmetic is exact give jax's
  values, rounding ties one ulp off .5 included;
* past that, wrap / mirror / reflect are exact (integer arithmetic on the
  float's value), nearest clamps, constant gives cval;
* +-inf: the edge for nearest, cval for constant, NaN otherwise;
* NaN gives NaN; its gradient is NaN only where NaN was read;
* orders are validated in Python; zero points, zero-size grids and batches
  of zero work on every path.
"""

import math
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.ndimage import map_coordinates as reference

from map_coordinates_table import CVAL, EXTREME, FINITE, GRID, MODES, expected
from xlabind.ops import map_coordinates

jax.config.update("jax_enable_x64", True)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("mode", MODES)
def test_finite_coordinates_match_jax(mode, order, dtype):
    coords = jnp.asarray(FINITE, dtype)
    if dtype == jnp.float32:  # float32 cannot hold 2^29 - 2.5: keep what it holds exactly
        coords = coords[jnp.abs(coords) < 2.0 ** 23]
    grid = jnp.asarray(GRID, dtype)
    got = map_coordinates(grid, [coords], order, mode, cval=CVAL)
    want = reference(grid, [coords], order, mode, cval=CVAL)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("mode", MODES)
def test_extreme_coordinates_follow_the_table(mode, order):
    got = map_coordinates(jnp.asarray(GRID), [jnp.asarray(EXTREME)], order, mode, cval=CVAL)
    want = [expected(mode, c) for c in EXTREME]
    np.testing.assert_array_equal(np.asarray(got), want, err_msg=f"{EXTREME}")


@pytest.mark.parametrize("mode", MODES)
def test_float32_extremes_follow_the_table(mode):
    coords = np.asarray(EXTREME, np.float32)  # as float32 holds them
    got = map_coordinates(jnp.asarray(GRID, jnp.float32), [jnp.asarray(coords)], 1, mode,
                          cval=CVAL)
    want = np.asarray([expected(mode, float(c)) for c in coords], np.float32)
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("mode", MODES)
def test_extremes_in_2d_and_in_the_vector_kernel(mode):
    # Many interior points (the AVX2 groups) with extreme ones among them, on
    # each axis: each extreme point takes the table's value, its neighbours
    # jax's.
    rng = np.random.default_rng(0)
    grid = jnp.asarray(rng.normal(size=(5, 6)))
    coords = [rng.uniform(0.5, 3.5, size=64), rng.uniform(0.5, 4.5, size=64)]
    reference_values = np.asarray(reference(grid, [jnp.asarray(c) for c in coords], 1, mode,
                                            CVAL))
    for axis in (0, 1):
        for k, c in zip(range(3, 64, 8), EXTREME):
            bad = [x.copy() for x in coords]
            bad[axis][k] = c
            got = np.asarray(map_coordinates(grid, [jnp.asarray(x) for x in bad], 1, mode, CVAL))
            others = np.arange(64) != k
            np.testing.assert_allclose(got[others], reference_values[others], rtol=1e-12)
            if math.isnan(c) or (math.isinf(c) and mode not in ("constant", "nearest")):
                assert math.isnan(got[k])
            else:
                assert math.isfinite(got[k]), (axis, c, mode, got[k])


def test_nan_coordinates_give_nan_and_nan_gradients_only_where_nan_was_read():
    grid = jnp.asarray(GRID)
    coords = jnp.asarray([math.nan, 1.5])
    values = map_coordinates(grid, [coords], 1, "constant")
    assert math.isnan(values[0]) and values[1] == 11.5
    g_grid = jax.grad(lambda g: map_coordinates(g, [coords], 1).sum())(grid)
    assert math.isnan(g_grid[0]) and np.array_equal(g_grid[1:], [0.5, 0.5, 0.0, 0.0])
    g_coords = jax.grad(lambda c: map_coordinates(grid, [c], 1).sum())(coords)
    assert math.isnan(g_coords[0]) and g_coords[1] == 1.0


@pytest.mark.parametrize("mode", ["nearest", "constant"])
def test_infinite_coordinates_have_zero_gradients_where_they_have_values(mode):
    grid = jnp.asarray(GRID)
    coords = jnp.asarray([math.inf, -math.inf, 1e30, -1e30, 2.5])
    g_coords = jax.grad(lambda c: map_coordinates(grid, [c], 1, mode, CVAL).sum())(coords)
    np.testing.assert_array_equal(g_coords, [0.0, 0.0, 0.0, 0.0, 1.0])
    g_grid = jax.grad(lambda g: map_coordinates(g, [coords], 1, mode, CVAL).sum())(grid)
    want = [1.0, 0.0, 0.5, 0.5, 1.0] if mode == "nearest" else [0.0, 0.0, 0.5, 0.5, 0.0]
    if mode == "nearest":  # -inf and -1e30 read node 0, inf and 1e30 node 4
        want = [2.0, 0.0, 0.5, 0.5, 2.0]
    np.testing.assert_array_equal(g_grid, want)


@pytest.mark.parametrize("order", [1, 1.0, True, np.int64(1), np.float32(1.0)])
def test_integer_valued_orders_are_accepted_as_jax_accepts_them(order):
    grid = jnp.asarray(GRID)
    c = jnp.asarray([1.5])
    np.testing.assert_array_equal(map_coordinates(grid, [c], order), [11.5])
    np.testing.assert_array_equal(jax.jit(lambda c: map_coordinates(grid, [c], order))(c), [11.5])


@pytest.mark.parametrize("order", [0.5, "1", None, math.nan, [1]])
def test_other_orders_are_a_value_error(order):
    with pytest.raises(ValueError, match=r"map_coordinates: order must be an integer"):
        map_coordinates(jnp.asarray(GRID), [jnp.asarray([1.5])], order)


def test_orders_past_five_are_not_implemented():
    with pytest.raises(NotImplementedError, match=r"order must be 0 to 5, got 6"):
        map_coordinates(jnp.asarray(GRID), [jnp.asarray([1.5])], 6)


@pytest.mark.parametrize("order", [0, 1])
def test_zero_points(order):
    grid = jnp.asarray(GRID)
    empty = jnp.zeros((0,))
    assert map_coordinates(grid, [empty], order).shape == (0,)
    assert jax.jit(lambda c: map_coordinates(grid, [c], order))(jnp.zeros((2, 0))).shape == (2, 0)
    np.testing.assert_array_equal(
        jax.grad(lambda g: map_coordinates(g, [empty], order).sum())(grid), np.zeros(5))
    assert jax.grad(lambda c: map_coordinates(grid, [c], order).sum())(empty).shape == (0,)
    assert jax.vmap(lambda c: map_coordinates(grid, [c], order))(jnp.zeros((3, 0))).shape == (3, 0)


def test_batches_of_zero():
    grid = jnp.asarray(GRID)
    coords = jnp.zeros((0, 4))
    assert jax.vmap(lambda c: map_coordinates(grid, [c], 1))(coords).shape == (0, 4)
    assert jax.vmap(lambda g: map_coordinates(g, [jnp.ones(4)], 1))(jnp.zeros((0, 5))).shape == (
        0, 4)
    grads = jax.vmap(jax.grad(lambda g, c: map_coordinates(g, [c], 1).sum(), argnums=(0, 1)))(
        jnp.zeros((0, 5)), coords)
    assert grads[0].shape == (0, 5) and grads[1].shape == (0, 4)


def test_zero_size_grids():
    coords = [jnp.asarray([0.5, -3.0]), jnp.asarray([1.0, 2.0])]
    grid = jnp.zeros((0, 3))
    np.testing.assert_array_equal(map_coordinates(grid, coords, 1, "constant", cval=2.0), [2, 2])
    np.testing.assert_array_equal(jax.jit(lambda g: map_coordinates(g, coords, 0, cval=2.0))(grid),
                                  [2, 2])
    assert jax.grad(lambda g: map_coordinates(g, coords, 1).sum())(grid).shape == (0, 3)
    np.testing.assert_array_equal(
        jax.grad(lambda c: map_coordinates(grid, [c, coords[1]], 1).sum())(coords[0]), [0, 0])
    for mode in ("nearest", "wrap", "mirror", "reflect"):
        with pytest.raises(ValueError, match=rf"mode '{mode}' has nothing to read in a grid with "
                                             r"an empty dimension \(shape \(0, 3\)\)"):
            map_coordinates(grid, coords, 1, mode)


def test_float64_coordinates_on_a_float32_grid_use_their_precision():
    grid = jnp.asarray(GRID, jnp.float32)
    coords = jnp.asarray([1e8 + 0.5, 3.25])  # float32 would round the first to 1e8
    got = map_coordinates(grid, [coords], 1, "wrap")
    assert got.dtype == jnp.float32
    np.testing.assert_allclose(got, reference(grid, [coords], 1, "wrap"), rtol=1e-6)


def test_the_same_values_without_the_vector_kernels():
    # XLABIND_NO_SIMD=1 takes every point through the scalar path.
    script = (
        "import jax, jax.numpy as jnp, numpy as np, math\n"
        "jax.config.update('jax_enable_x64', True)\n"
        "from xlabind.ops import map_coordinates\n"
        f"c = jnp.asarray([float(x) for x in {[str(x) for x in [1.5, 2.25] * 8 + EXTREME]!r}])\n"
        f"g = jnp.asarray({GRID.tolist()!r})\n"
        "for m in ['constant', 'nearest', 'wrap', 'mirror', 'reflect']:\n"
        "    print(m, np.asarray(map_coordinates(g, [c], 1, m, -1.0)).tolist())\n")
    outputs = []
    for flag in ("0", "1"):
        outputs.append(subprocess.run([sys.executable, "-c", script], check=True,
                                      capture_output=True, text=True,
                                      env={**os.environ, "XLABIND_NO_SIMD": flag}).stdout)
    assert outputs[0] == outputs[1] and "nan" in outputs[0]
