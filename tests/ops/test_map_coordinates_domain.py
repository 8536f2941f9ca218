"""xlabind.ops.map_coordinates is total: every coordinate has the value of the
the interpolation guide's table ("Every coordinate has a value"), the same in the CPU's
scalar and vector kernels and in the CUDA kernels on a GPU (the cases over
implementations; tests/gpu/test_gpu_map_coordinates.py adds the GPU's NaN
gradients):

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

import cases
import implementations
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.ndimage import map_coordinates as reference
from map_coordinates_table import CVAL, EXTREME, FINITE, GRID, MODES, expected

from xlabind.ops import map_coordinates

jax.config.update("jax_enable_x64", True)


# The CPU kernels and the CUDA kernels (a GPU's cases skip without one); the
# TPU formulation's float32 coordinates of every magnitude are
# tests/tpu/test_tpu_ops.py's.
def on_cpu_and_gpu(impl, *case):
    return impl != "tpu"


@pytest.mark.parametrize(
    "impl, mode, order, dtype",
    implementations.params(
        "finite",
        MODES,
        (0, 1),
        (np.float32, np.float64),
        dtype_axis=2,
        keep=on_cpu_and_gpu,
        sampled=6,
    ),
)
def test_finite_coordinates_match_jax(impl, mode, order, dtype):
    coords = np.asarray(FINITE, dtype)
    if dtype == np.float32:  # float32 cannot hold 2^29 - 2.5: keep what it holds exactly
        coords = coords[np.abs(coords) < 2.0**23]
    grid = np.asarray(GRID, dtype)
    got = map_coordinates(
        implementations.put(impl, grid), [implementations.put(impl, coords)], order, mode, cval=CVAL
    )
    want = reference(jnp.asarray(grid), [jnp.asarray(coords)], order, mode, cval=CVAL)
    tol = 1e-12 if dtype == np.float64 else 1e-6
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    "impl, mode, order",
    implementations.params("extreme", MODES, (0, 1), keep=on_cpu_and_gpu, sampled=5),
)
def test_extreme_coordinates_follow_the_table(impl, mode, order):
    at = implementations.put(impl, np.asarray(EXTREME))
    got = map_coordinates(implementations.put(impl, np.asarray(GRID)), [at], order, mode, cval=CVAL)
    want = [expected(mode, c) for c in EXTREME]
    np.testing.assert_array_equal(np.asarray(got), want, err_msg=f"{EXTREME}")


@pytest.mark.parametrize("mode", MODES)
def test_float32_extremes_follow_the_table(mode):
    coords = np.asarray(EXTREME, np.float32)  # as float32 holds them
    got = map_coordinates(jnp.asarray(GRID, jnp.float32), [jnp.asarray(coords)], 1, mode, cval=CVAL)
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
    reference_values = np.asarray(reference(grid, [jnp.asarray(c) for c in coords], 1, mode, CVAL))
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


@pytest.mark.parametrize(
    "order, mode", cases.product("huge", range(6), ("wrap", "mirror", "reflect"), sampled=6)
)
def test_huge_coordinates_in_periodic_modes_read_their_node(order, mode):
    # An integral coordinate reads its node at every order; past 2^53 the
    # spline's nodes (start + j) rounded onto each other before the fix.
    grid = jnp.asarray([1.0, 4.0, 2.0, 8.0, 5.0, 3.0])
    period = {"wrap": 6, "mirror": 10, "reflect": 12}[mode]
    coords = [2.0**52, 2.0**53, 2.0**54 + 4, 1e30, -(2.0**60), 3.0]
    folded = [int(c) % period for c in coords]
    nodes = [f if f < 6 else (period - f if mode == "mirror" else period - 1 - f) for f in folded]
    got = map_coordinates(grid, [jnp.asarray(coords)], order, mode, prefilter=False)
    # prefilter=False: the spline's coefficients are the samples, so a node's
    # value is the weights' sum at that node: exact for order <= 1, near otherwise.
    spline_at_node = map_coordinates(
        grid, [jnp.asarray([float(n) for n in nodes])], order, mode, prefilter=False
    )
    np.testing.assert_allclose(got, spline_at_node, rtol=1e-12, atol=1e-12)
    # The grid gradient scatters to the same nodes.
    weights = jax.grad(lambda g: map_coordinates(g, [jnp.asarray(coords[:1])], order, mode).sum())
    near = jax.grad(
        lambda g: map_coordinates(g, [jnp.asarray([float(nodes[0])])], order, mode).sum()
    )
    np.testing.assert_allclose(weights(grid), near(grid), rtol=1e-9, atol=1e-12)


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


@pytest.mark.parametrize(
    "cval, says",
    [("a", "got str"), (None, "got NoneType"), (jnp.array([2.0, 3.0]), r"got shape \(2,\)")],
)
def test_a_cval_that_is_not_a_numeric_scalar_is_a_type_error(cval, says):
    # jax's own messages named neither the op nor cval (or broadcast it per point).
    with pytest.raises(TypeError, match=rf"map_coordinates: cval must be a number .*{says}"):
        map_coordinates(jnp.asarray(GRID), [jnp.asarray([1.5])], 1, "constant", cval)


@pytest.mark.parametrize("order", range(6))
def test_the_gradient_with_respect_to_a_traced_cval(order):
    # Orders 2-5 pad the grid with cval; jnp.pad's constant_values had no
    # gradient in jax. d/dcval is linear: the finite difference is exact.
    grid = jnp.arange(12.0).reshape(3, 4)
    coords = [jnp.array([-0.7, 1.2, 3.5]), jnp.array([1.0, 4.2, 0.3])]

    def total(cval):
        return map_coordinates(grid, coords, order, "constant", cval).sum()

    want = (total(jnp.asarray(1.5)) - total(jnp.asarray(0.5))) / 1.0
    np.testing.assert_allclose(jax.grad(total)(jnp.asarray(0.5)), want, rtol=1e-9, atol=1e-12)


def test_coordinates_that_do_not_broadcast_name_their_shapes():
    grid = jnp.ones((3, 4))
    with pytest.raises(ValueError, match=r"must broadcast together, got shapes \(3,\), \(4,\)"):
        map_coordinates(grid, [jnp.ones(3), jnp.ones(4)], 1)


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
        jax.grad(lambda g: map_coordinates(g, [empty], order).sum())(grid), np.zeros(5)
    )
    assert jax.grad(lambda c: map_coordinates(grid, [c], order).sum())(empty).shape == (0,)
    assert jax.vmap(lambda c: map_coordinates(grid, [c], order))(jnp.zeros((3, 0))).shape == (3, 0)


def test_batches_of_zero():
    grid = jnp.asarray(GRID)
    coords = jnp.zeros((0, 4))
    assert jax.vmap(lambda c: map_coordinates(grid, [c], 1))(coords).shape == (0, 4)
    assert jax.vmap(lambda g: map_coordinates(g, [jnp.ones(4)], 1))(jnp.zeros((0, 5))).shape == (
        0,
        4,
    )
    grads = jax.vmap(jax.grad(lambda g, c: map_coordinates(g, [c], 1).sum(), argnums=(0, 1)))(
        jnp.zeros((0, 5)), coords
    )
    assert grads[0].shape == (0, 5) and grads[1].shape == (0, 4)


def test_zero_size_grids():
    coords = [jnp.asarray([0.5, -3.0]), jnp.asarray([1.0, 2.0])]
    grid = jnp.zeros((0, 3))
    np.testing.assert_array_equal(map_coordinates(grid, coords, 1, "constant", cval=2.0), [2, 2])
    np.testing.assert_array_equal(
        jax.jit(lambda g: map_coordinates(g, coords, 0, cval=2.0))(grid), [2, 2]
    )
    assert jax.grad(lambda g: map_coordinates(g, coords, 1).sum())(grid).shape == (0, 3)
    np.testing.assert_array_equal(
        jax.grad(lambda c: map_coordinates(grid, [c, coords[1]], 1).sum())(coords[0]), [0, 0]
    )
    for mode in ("nearest", "wrap", "mirror", "reflect"):
        with pytest.raises(
            ValueError,
            match=rf"mode '{mode}' has nothing to read in a grid with "
            r"an empty dimension \(shape \(0, 3\)\)",
        ):
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
        "    print(m, np.asarray(map_coordinates(g, [c], 1, m, -1.0)).tolist())\n"
    )
    outputs = []
    for flag in ("0", "1"):
        outputs.append(
            subprocess.run(
                [sys.executable, "-c", script],
                check=True,
                capture_output=True,
                text=True,
                env={**os.environ, "XLABIND_NO_SIMD": flag},
            ).stdout
        )
    assert outputs[0] == outputs[1] and "nan" in outputs[0]


# For every vector kernel (orders 0 to 5, float32 and float64) the scalar
# path's answer on special grids and coordinates: "agree to rounding" as a
# tested property. Groups of interior points (what the vector kernels take)
# surround every special value.


def _special_grids(dtype) -> dict:
    info = np.finfo(dtype)
    tiny = float(info.smallest_subnormal)
    return {
        "-inf node": [0.5, -np.inf, 2.0, 3.0, 1.0, 0.25, 2.0, -1.0, 0.5, 1.5, 2.5, 3.5],
        "+inf node": [0.5, 1.0, np.inf, 3.0, 1.0, 0.25, 2.0, -1.0, 0.5, 1.5, 2.5, 3.5],
        "nan node": [0.5, 1.0, 2.0, np.nan, 1.0, 0.25, 2.0, -1.0, 0.5, 1.5, 2.5, 3.5],
        "+-max": [float(info.max), -float(info.max)] * 6,
        "near max": [0.75 * float(info.max), 0.5 * float(info.max)] * 6,
        "denormal": [tiny, -tiny, 2 * tiny, 0.0] * 3,
    }


def _special_coords(dtype) -> np.ndarray:
    info = np.finfo(dtype)
    tiny = float(info.smallest_subnormal)
    coords = np.concatenate(
        [
            np.linspace(0.0, 11.0, 45),
            [
                np.inf,
                -np.inf,
                np.nan,
                float(info.max),
                -float(info.max),
                tiny,
                -tiny,
                1.0 + tiny,
                5.0,
                5.0,
            ],
        ]
    )
    return np.stack([coords, np.roll(coords, 7), np.roll(coords, 19)], 0).astype(dtype)


_SPECIAL_SCRIPT = r"""
import json, sys
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
from xlabind.ops import map_coordinates

out = {}
for case in json.load(sys.stdin):
    dtype = np.dtype(case["dtype"])
    grid = jnp.asarray(np.asarray([float.fromhex(x) for x in case["grid"]], dtype))
    coords = jnp.asarray(np.asarray([float.fromhex(x) for x in case["coords"]], dtype))
    v = map_coordinates(grid, [coords], case["order"], case["mode"])
    out[case["key"]] = [float(x).hex() for x in np.asarray(v, np.float64).ravel()]
json.dump(out, sys.stdout)
"""


def _special_cases() -> list[dict]:
    cases = []
    for dtype in ("float32", "float64"):
        coords = [float(x).hex() for x in _special_coords(dtype).ravel()]
        for name, grid in _special_grids(dtype).items():
            grid = [float(x).hex() for x in np.asarray(grid, dtype)]
            for order in range(6):
                for mode in MODES:
                    cases.append(
                        dict(
                            key=f"{dtype} {name} order {order} {mode}",
                            dtype=dtype,
                            grid=grid,
                            coords=coords,
                            order=order,
                            mode=mode,
                        )
                    )
    return cases


def _special_values(simd: bool) -> dict:
    import json

    done = subprocess.run(
        [sys.executable, "-c", _SPECIAL_SCRIPT],
        capture_output=True,
        text=True,
        input=json.dumps(_special_cases()),
        env={**os.environ, "XLABIND_NO_SIMD": "0" if simd else "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {
        k: np.asarray([float.fromhex(x) for x in v]) for k, v in json.loads(done.stdout).items()
    }


@pytest.fixture(scope="module")
def special_values():
    return _special_values(True), _special_values(False)


def _agree_to_rounding(vector, scalar, scale, eps):
    """Equal where either is not finite (NaN with NaN, an infinity with the same
    one), else within a few roundings of the sum's terms (scale: the largest
    finite grid value; spline coefficients are at most a few times that)."""
    special = ~np.isfinite(vector) | ~np.isfinite(scalar)
    same_special = (np.isnan(vector) & np.isnan(scalar)) | (vector == scalar)
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.abs(vector - scalar) <= 64 * eps * max(scale, np.finfo(np.float64).tiny)
    return np.where(special, same_special, close)


def test_every_vector_kernel_gives_the_scalar_answer_on_special_values(special_values):
    vector, scalar = special_values
    assert len(vector) == len(_special_cases()) == 2 * 6 * 6 * len(MODES)
    wrong = []
    for key in vector:
        dtype, name = key.split()[0], key.split(" order")[0].split(" ", 1)[1]
        grid = np.asarray(_special_grids(dtype)[name], np.float64)
        scale = np.max(np.abs(np.where(np.isfinite(grid), grid, 0.0)))
        ok = _agree_to_rounding(vector[key], scalar[key], scale, np.finfo(dtype).eps)
        if not ok.all():
            at = np.flatnonzero(~ok)[:3]
            wrong.append(f"{key}: vector {vector[key][at]} scalar {scalar[key][at]} at {at}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_order_1_on_an_infinite_node_and_near_the_largest_float_is_jaxs(special_values, dtype):
    # A log-density table's -inf node: -inf on the node and between it and a
    # neighbour, as jax (the neighbour's own node, where the -inf node has
    # weight 0, is NaN in jax too); grids near the largest float: finite.
    coords = _special_coords(dtype)[0, :45]
    for name in ("-inf node", "+inf node", "near max"):
        grid = jnp.asarray(np.asarray(_special_grids(dtype)[name], dtype))
        want = np.asarray(reference(grid, [jnp.asarray(coords)], 1, "nearest"), np.float64)
        for values in special_values:
            got = values[f"{dtype} {name} order 1 nearest"][:45]
            np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=name)
    on_node = special_values[0][f"{dtype} -inf node order 1 nearest"][:45]
    assert np.all(on_node[(coords >= 1.0) & (coords < 2.0)] == -np.inf)
