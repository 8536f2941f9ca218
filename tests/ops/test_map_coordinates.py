"""xlabind.ops.map_coordinates' contract, held alike by every implementation
present (the CPU kernels; the TPU formulation, on a chip or interpreted on
the CPU; the CUDA kernels on a GPU): values against jax's and SciPy's at
every order, mode, dtype and rank, gradients in the grid and the
coordinates, no points, vmap. Then the CPU kernels' own: gradients to
second order against jax's, vmap layouts, the vector kernels (AVX2) against
the scalar path, threads, CUDA lowering, non-finite cvals.

The products are sampled in the default `bazel test //...` and run whole
under `--config=all` (tests/support/cases.py)."""

import functools

import cases
import implementations
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.ndimage as ndimage
import tpu_lowering
from jax.scipy.ndimage import map_coordinates as reference
from jax.test_util import check_grads
from map_coordinates_table import MODES, SCIPY_MODE

from xlabind.ops import map_coordinates

jax.config.update("jax_enable_x64", True)

SHAPES = [(11,), (6, 7), (5, 6, 7)]


def problem(shape, dtype, points=(3, 4), seed=0, low=-2.5, high=None):
    rng = np.random.default_rng(seed)
    grid = jnp.asarray(rng.normal(size=shape), dtype)
    high = max(shape) + 1.5 if high is None else high
    coords = [jnp.asarray(rng.uniform(low, high, size=points), dtype) for _ in shape]
    # Some points exactly on grid lines and half-way between them (rounding ties).
    coords[0] = coords[0].at[0, 0].set(2.0).at[0, 1].set(1.5).at[0, 2].set(-0.5)
    return grid, coords


def batched(fn, cases, *args):
    """{case: fn(*args, *case)} for every case, compiled as one program (one
    compilation instead of one per case)."""
    return jax.jit(lambda *a: {str(case): fn(*a, *case) for case in cases})(*args)


# -- the contract, held alike by every implementation present ---------------
# (tests/support/implementations.py: the CPU kernels, the TPU formulation,
# the CUDA kernels); what one implementation alone has follows below, and in
# tests/tpu/test_tpu_ops.py and tests/gpu/test_gpu_map_coordinates.py.

ORDERS = range(6)
DTYPES = (np.float32, np.float64)
RANKS = (1, 2, 3, 4)
# Orders 0 and 1 against jax's; the splines against SciPy, whose reflect
# prefilter is exact only on axes of about 20 nodes or more (it misses its own
# samples by 1e-5 on 3 nodes, 2e-11 on 9). Four dimensions at orders 0 and 1.
# float32's splines (2e-4) hold on the smaller grids of the former TPU suite,
# which the TPU formulation, interpreted on the CPU, runs in less time.
GRIDS = {
    "linear": {1: (11,), 2: (6, 7), 3: (5, 6, 7), 4: (3, 4, 3, 5)},
    "spline": {1: (30,), 2: (24, 26), 3: (20, 21, 22)},
    "spline float32": {1: (12,), 2: (12, 10), 3: (9, 8, 7)},
}
CVALS = (0.0, -1.25)


@pytest.fixture(autouse=True)
def implementation_rule(request):
    """The lowering rule of the case's implementation (the CPU's for the rest)."""
    callspec = getattr(request.node, "callspec", None)
    implementations.switch_to(callspec.params.get("impl", "cpu") if callspec else "cpu")
    yield


@pytest.fixture(autouse=True, scope="module")
def back_to_the_cpu_rule():
    yield
    implementations.switch_to("cpu")


def reference_values(grid, coords, order, mode, cval):
    """jax's values at orders 0 and 1 (in the grid's dtype, on the CPU),
    SciPy's in float64 for the splines."""
    if order <= 1:
        cpu = jax.devices("cpu")[0]
        return np.asarray(
            reference(
                jax.device_put(grid, cpu),
                [jax.device_put(c, cpu) for c in coords],
                order,
                mode,
                cval,
            )
        )
    return ndimage.map_coordinates(
        np.asarray(grid, np.float64),
        [np.asarray(c, np.float64) for c in coords],
        order=order,
        mode=SCIPY_MODE[mode],
        cval=cval,
    )


def contract_tolerance(impl, order, dtype, grid):
    if impl == "tpu":  # float32 weights in another order of sums than the CPU's
        return dict(rtol=2e-4, atol=2e-4 * float(np.abs(grid).max()))
    if dtype == np.float64:
        return dict(rtol=1e-12, atol=1e-12)
    # float32: up to 216 terms (order 5 in 3-D) against SciPy's float64.
    return dict(rtol=2e-6, atol=2e-6) if order <= 1 else dict(rtol=2e-4, atol=2e-4)


def contract_problem(order, rank, dtype, points=(4, 60), seed=0):
    """A grid of the order's family and points inside, near and past every
    edge, on nodes, half-way between them (rounding ties) and on the edges."""
    family = "linear" if order <= 1 else "spline" if dtype == np.float64 else "spline float32"
    shape = GRIDS[family][rank]
    rng = np.random.default_rng(seed + 10 * rank + order)
    grid = rng.normal(size=shape).astype(dtype)
    coords = [rng.uniform(-2.5, n + 1.5, size=points).astype(dtype) for n in shape]
    coords[0][0, :3] = (2.0, 1.5, -0.5)
    for c, n in zip(coords, shape):
        c[1, :4] = (0.0, n - 1.0, n - 0.5, np.floor(n / 2))
    return grid, coords


@pytest.mark.parametrize(
    "impl, order, mode, dtype, rank",
    implementations.params(
        "values",
        ORDERS,
        MODES,
        DTYPES,
        RANKS,
        dtype_axis=2,
        keep=lambda impl, order, mode, dtype, rank: (
            rank in GRIDS["linear" if order <= 1 else "spline"]
        ),
        sampled=10,
    ),
)
def test_values_agree_with_the_reference(impl, order, mode, dtype, rank):
    """Every order, mode, dtype and rank, both cvals, jitted (and eagerly at
    order 1): jax's values at orders 0 and 1, SciPy's for the splines; of the
    input's dtype, on the input's device; the GPU's also as the CPU's."""
    grid, coords = contract_problem(order, rank, dtype)
    g, c = implementations.put(impl, grid), implementations.put(impl, coords)
    f = jax.jit(lambda g, c: [map_coordinates(g, c, order, mode, cval) for cval in CVALS])
    got = f(g, c)
    tol = contract_tolerance(impl, order, dtype, grid)
    for cval, value in zip(CVALS, got):
        assert value.shape == coords[0].shape and value.dtype == dtype
        assert value.devices() == {implementations.device(impl)}
        want = reference_values(grid, coords, order, mode, cval)
        np.testing.assert_allclose(value, want, **tol, err_msg=f"cval {cval}")
    if order == 1:  # eagerly too (one executable per configuration: test_ops_dispatch.py)
        np.testing.assert_allclose(map_coordinates(g, c, 1, mode, CVALS[1]), got[1], **tol)
    if impl == "gpu":  # the same program on the CPU: the kernels' other half
        cpu = implementations.put("cpu", [grid, *coords])
        close = dict(rtol=1e-12, atol=1e-12) if dtype == np.float64 else dict(rtol=1e-5, atol=5e-5)
        for a, b in zip(got, f(cpu[0], cpu[1:])):
            np.testing.assert_allclose(a, b, **close)


@pytest.mark.parametrize(
    "impl, order, mode, dtype",
    implementations.params(
        "gradients",
        ORDERS,
        MODES,
        DTYPES,
        dtype_axis=2,
        keep=lambda impl, order, mode, dtype: (
            # The CPU's spline gradients: tests/ops/test_spline.py, by differences.
            (impl != "cpu" or order <= 1)
            # The TPU formulation's order-0 grid gradient takes two minutes a
            # case interpreted on the CPU (its Pallas scatter, measured here):
            # on a chip only.
            and (impl != "tpu" or order > 0 or tpu_lowering.ON_TPU)
        ),
        sampled=6,
    ),
)
def test_gradients_in_the_grid_and_the_coordinates_agree(impl, order, mode, dtype):
    """The gradient of a sum of sines of the values in the grid (the
    scatter: the gather's transpose) and in every coordinate array, away
    from grid lines: jax's at orders 0 and 1, the CPU kernels' in float64 for
    the splines."""
    shape = (5, 6, 7) if order <= 1 else (9, 10)
    rng = np.random.default_rng(order)
    grid = rng.normal(size=shape)
    coords = [rng.uniform(-2.5, n + 1.5, size=(4, 50)) + 0.123 for n in shape]
    loss = lambda mc: lambda g, c: jnp.sum(jnp.sin(mc(g, c, order, mode, 0.5)))
    g, c = (
        implementations.put(impl, grid.astype(dtype)),
        implementations.put(impl, [x.astype(dtype) for x in coords]),
    )
    got = jax.jit(jax.grad(loss(map_coordinates), argnums=(0, 1)))(g, c)
    cpu = implementations.put("cpu", [grid, *coords])
    if order <= 1:  # jax's own, in the dtype of the case
        cpu = [x.astype(dtype) for x in cpu]
    want = jax.jit(jax.grad(loss(reference if order <= 1 else map_coordinates), argnums=(0, 1)))(
        cpu[0], cpu[1:]
    )
    if impl == "tpu":
        tol = dict(rtol=2e-3, atol=2e-3 * max(1.0, float(np.abs(want[0]).max())))
    elif dtype == np.float32:
        # The GPU's grid gradient adds with atomics in whatever order the
        # threads arrive: a few ulps of the (large) sums (2.2e-6 on an H200).
        tol = dict(rtol=2e-5, atol=2e-5) if order <= 1 else dict(rtol=1e-4, atol=1e-4)
    else:
        tol = dict(rtol=1e-10, atol=1e-10)
    for which, a, b in zip(
        ["grid"] + [f"axis {k}" for k in range(len(shape))], [got[0], *got[1]], [want[0], *want[1]]
    ):
        assert a.dtype == dtype
        np.testing.assert_allclose(a, b, **tol, err_msg=which)


@pytest.mark.parametrize(
    "impl, order, points",
    implementations.params("no points", (0, 1, 3), ((0,), (0, 4), (4, 0)), sampled=4),
)
def test_no_points_have_no_values_and_no_gradient(impl, order, points):
    """Coordinates with no point (an empty dimension anywhere), and batches
    of none: empty values, eager and jitted, a zero grid gradient and empty
    coordinate gradients (the kernels' blocks cannot be empty)."""
    grid = implementations.put(
        impl, np.random.default_rng(order).normal(size=(5, 6, 7)).astype(np.float32)
    )
    coords = implementations.put(impl, np.zeros((3, *points), np.float32))
    f = lambda g, c: map_coordinates(g, list(c), order, "constant", cval=0.5)
    eager, jitted = f(grid, coords), jax.jit(f)(grid, coords)
    assert eager.shape == jitted.shape == points
    total = lambda g, c: f(g, c).sum()
    np.testing.assert_array_equal(jax.jit(jax.grad(total))(grid, coords), np.zeros(grid.shape))
    assert jax.jit(jax.grad(total, 1))(grid, coords).shape == coords.shape
    batch = jax.vmap(lambda c: map_coordinates(grid, list(c), order))
    assert batch(implementations.put(impl, np.zeros((0, 3, 4), np.float32))).shape == (0, 4)


@pytest.mark.parametrize("impl, order", implementations.params("vmap", (1, 3), sampled=2))
def test_vmap_over_grids_is_one_call_with_each_grids_values(impl, order):
    grid, coords = contract_problem(order, 2, np.float32)
    grids = implementations.put(impl, np.stack([grid, 2 * grid, -grid]))
    c = implementations.put(impl, coords)
    f = jax.jit(jax.vmap(lambda g: map_coordinates(g, c, order, "wrap")))
    got = f(grids)
    single = reference_values(grid, coords, order, "wrap", 0.0)
    tol = contract_tolerance(impl, order, np.float32, 2 * grid)
    for k, scale in enumerate((1, 2, -1)):
        np.testing.assert_allclose(got[k], scale * single, **tol)
    if impl != "tpu":  # one kernel call for the batch, not one per grid
        assert f.lower(grids).as_text().count("@xlabind_map_coordinates(") == 1


@pytest.mark.parametrize("shape, mode", cases.product("gradients", SHAPES, MODES, sampled=5))
def test_gradients_in_both_arguments(shape, mode):
    grid, coords = problem(shape, jnp.float64)
    # Away from grid lines, where the interpolation is smooth in the coordinates.
    coords = [c + 0.123 for c in coords]
    f = lambda g, *c: map_coordinates(g, list(c), 1, mode, cval=0.5)
    check_grads(f, (grid, *coords), order=1, modes=("fwd", "rev"), eps=1e-4)
    # Linear in the grid: every order there.
    check_grads(lambda g: f(g, *coords), (grid,), order=2, modes=("fwd", "rev"))
    # And the same derivatives as jax's.
    ours = jax.grad(lambda g, c0: jnp.sum(jnp.sin(f(g, c0, *coords[1:]))), argnums=(0, 1))(
        grid, coords[0]
    )
    theirs = jax.grad(
        lambda g, c0: jnp.sum(jnp.sin(reference(g, [c0, *coords[1:]], 1, mode, 0.5))),
        argnums=(0, 1),
    )(grid, coords[0])
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_second_derivatives_in_the_coordinates():
    grid, coords = problem((6, 7), jnp.float64)
    coords = [c + 0.123 for c in coords]
    f = lambda c0, c1: jnp.sum(map_coordinates(grid, [c0, c1], 1, "nearest") ** 2)
    g = lambda c0, c1: jnp.sum(reference(grid, [c0, c1], 1, "nearest") ** 2)
    np.testing.assert_allclose(
        jax.hessian(f, argnums=(0, 1))(*coords)[0][1],
        jax.hessian(g, argnums=(0, 1))(*coords)[0][1],
        rtol=1e-10,
        atol=1e-12,
    )


@pytest.mark.parametrize("mode", ["constant", "nearest", "mirror"])
def test_hessian_over_grid_and_coordinates_is_jaxs(mode):
    # jax.hessian is jacfwd(jacrev): the grid's gradient (the scatter) is
    # differentiated in the coordinates.
    grid, coords = problem((5, 6), jnp.float64)
    coords = [c + 0.123 for c in coords]
    f = lambda g, c0, c1: jnp.sum(jnp.sin(map_coordinates(g, [c0, c1], 1, mode, cval=0.5)))
    g = lambda g, c0, c1: jnp.sum(jnp.sin(reference(g, [c0, c1], 1, mode, 0.5)))
    ours = jax.hessian(f, argnums=(0, 1, 2))(grid, *coords)
    theirs = jax.hessian(g, argnums=(0, 1, 2))(grid, *coords)
    for row in range(3):
        for column in range(3):
            np.testing.assert_allclose(
                ours[row][column], theirs[row][column], rtol=1e-10, atol=1e-12
            )


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0)])
def test_vmap_runs_once_on_the_batch(in_axes):
    grid, coords = problem((5, 6, 7), jnp.float64)
    grids = jnp.stack([grid, 2 * grid, -grid])
    many = [jnp.stack([c, c + 0.5, c - 0.25]) for c in coords]
    args = (grids if in_axes[0] == 0 else grid, many if in_axes[1] == 0 else coords)
    got = jax.vmap(lambda g, c: map_coordinates(g, c, 1, "mirror"), in_axes=in_axes)(*args)
    want = jax.vmap(lambda g, c: reference(g, c, 1, "mirror"), in_axes=in_axes)(*args)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    text = (
        jax.jit(jax.vmap(lambda g, c: map_coordinates(g, c, 1, "mirror"), in_axes=in_axes))
        .lower(*args)
        .as_text()
    )
    assert text.count("@xlabind_map_coordinates(") == 1  # one kernel call, not one per element
    grad = jax.grad(
        lambda g: jnp.sum(
            jax.vmap(lambda g, c: map_coordinates(g, c, 1, "wrap"), in_axes=in_axes)(g, args[1])
            ** 2
        )
    )(args[0])
    want = jax.grad(
        lambda g: jnp.sum(
            jax.vmap(lambda g, c: reference(g, c, 1, "wrap"), in_axes=in_axes)(g, args[1]) ** 2
        )
    )(args[0])
    np.testing.assert_allclose(grad, want, rtol=1e-12, atol=1e-12)


def test_vmap_over_coordinate_sets_alone_reads_the_one_grid():
    """Under vmap over the coordinates only, the grid keeps a batch axis of
    size 1, as for coordinate sets given as leading rows (the grid's
    gradient adds every set's points into it): no copy of the grid per set,
    and jax's values and derivatives."""
    grid, coords = problem((5, 6, 7), jnp.float64)
    sets = [jnp.stack([c, c + 0.5, c - 0.25]).reshape(3, -1) for c in coords]
    ours = jax.vmap(lambda g, c: map_coordinates(g, c, 1, "mirror"), in_axes=(None, 0))
    theirs = jax.vmap(lambda g, c: reference(g, c, 1, "mirror"), in_axes=(None, 0))
    text = jax.jit(ours).lower(grid, sets).as_text()
    assert "tensor<3x5x6x7xf64>" not in text  # the grid once, not once per set
    np.testing.assert_allclose(ours(grid, sets), theirs(grid, sets), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(
        ours(grid, sets), map_coordinates(grid, sets, 1, "mirror"), rtol=1e-13, atol=1e-13
    )
    loss = lambda fn: lambda g, c: jnp.sum(jnp.sin(fn(g, c)))
    for argnum in (0, 1):
        got = jax.grad(loss(ours), argnum)(grid, sets)
        want = jax.grad(loss(theirs), argnum)(grid, sets)
        for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    tangent = jnp.cos(grid)
    got = jax.jvp(lambda g: ours(g, sets), (grid,), (tangent,))
    want = jax.jvp(lambda g: theirs(g, sets), (grid,), (tangent,))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("batched", [(0,), (1,), (0, 2)])
def test_vmap_over_some_coordinate_arrays_only(batched):
    # The kernels need every coordinate array laid out alike: the others are
    # broadcast (in the transpose too).
    grid, coords = problem((5, 6, 7), jnp.float64)
    args = [jnp.stack([c, c + 0.5, c - 0.25]) if a in batched else c for a, c in enumerate(coords)]
    in_axes = [0 if a in batched else None for a in range(3)]

    def values(mc):
        return lambda g, *c: jax.vmap(lambda *c: mc(g, list(c), 1, "reflect"), in_axes=in_axes)(*c)

    np.testing.assert_allclose(
        values(map_coordinates)(grid, *args), values(reference)(grid, *args), rtol=1e-13, atol=1e-13
    )
    ours = jax.grad(lambda *a: jnp.sum(jnp.sin(values(map_coordinates)(*a))), argnums=(0, 1, 2, 3))(
        grid, *args
    )
    theirs = jax.grad(lambda *a: jnp.sum(jnp.sin(values(reference)(*a))), argnums=(0, 1, 2, 3))(
        grid, *args
    )
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_the_gradient_in_the_grid_is_a_native_scatter():
    grid, coords = problem((8, 8, 8), jnp.float64, points=(10, 100))
    text = jax.jit(jax.grad(lambda g: map_coordinates(g, coords, 1).sum())).lower(grid).as_text()
    assert "@xlabind_map_coordinates_transpose(" in text


def test_inputs_jax_accepts_work_the_same():
    grid = jnp.arange(12.0).reshape(3, 4)
    # Scalars, broadcasting coordinates, Python lists, integer grids (jax's own path).
    np.testing.assert_allclose(map_coordinates(grid, [1.5, 2.0], 1), reference(grid, [1.5, 2.0], 1))
    c = [jnp.array([[0.5], [1.0]]), jnp.array([0.0, 1.0, 2.5])]
    np.testing.assert_allclose(
        map_coordinates(grid, c, 1, "nearest"), reference(grid, c, 1, "nearest")
    )
    ints = jnp.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(map_coordinates(ints, c, 1), reference(ints, c, 1))


def test_bad_arguments_are_clear_errors():
    grid = jnp.ones((3, 4))
    with pytest.raises(
        ValueError,
        match=r"coordinates must be a sequence of length input.ndim, "
        r"but 1 != 2",
    ):
        map_coordinates(grid, [jnp.ones(2)], 1)
    with pytest.raises(NotImplementedError, match=r"order must be 0 to 5, got 6"):
        map_coordinates(grid, [jnp.ones(2)] * 2, 6)
    with pytest.raises(NotImplementedError, match=r"mode must be one of .* got 'wrap-around'"):
        map_coordinates(grid, [jnp.ones(2)] * 2, 1, "wrap-around")


# -- the CPU's order-1 vector kernel (ffi/ops/map_coordinates/cpu_avx2_kernels.h)
# takes groups of 4 (float64) or 8 (float32) points whose cells lie inside the
# grid; the problems above are too small to reach it.
def many_points(shape, dtype, count=1003, seed=1):
    """Mostly interior points, with every tenth anywhere (outside, on the
    boundary) so that groups mix both paths, and a count no lane width divides."""
    rng = np.random.default_rng(seed)
    grid = jnp.asarray(rng.normal(size=shape), dtype)
    coords = []
    for size in shape:
        c = rng.uniform(0.0, size - 1.0, count)
        c[::10] = rng.uniform(-2.0, size + 1.0, c[::10].shape)
        c[5::97] = size - 1.0  # on the last node: its cell would leave the grid
        coords.append(jnp.asarray(c, dtype))
    return grid, coords


def values_and_slopes(f, grid, coords, mode):
    """f's values, and the gradients of a sum of their sines in the grid (the
    scatter) and in every coordinate array, jitted."""

    def total(g, c):
        return jnp.sum(jnp.sin(f(g, c, 1, mode, 0.5)))

    values = jax.jit(lambda g, c: f(g, c, 1, mode, 0.5))(grid, coords)
    in_grid, in_coords = jax.jit(jax.grad(total, argnums=(0, 1)))(grid, coords)
    return values, [in_grid, *in_coords]


@pytest.mark.parametrize(
    "shape, dtype",
    cases.product("many points", [(40,), (17, 23), (9, 10, 11), (4, 5, 6, 7)], DTYPES, sampled=4),
)
def test_many_points_match_jax(shape, dtype):
    grid, coords = many_points(shape, dtype)
    tol = 2e-5 if dtype == np.float32 else 1e-12

    def values_and_slopes_of(f):
        # Every mode in one program: the values and the gradient of a sum of
        # their sines in the grid and each coordinate array.
        def each(g, c, mode):
            values = f(g, c, 1, mode, 0.5)
            total = lambda g, c: jnp.sum(jnp.sin(f(g, c, 1, mode, 0.5)))
            in_grid, in_coords = jax.grad(total, argnums=(0, 1))(g, c)
            return values, [in_grid, *in_coords]

        return batched(each, [(mode,) for mode in MODES], grid, coords)

    got, want = values_and_slopes_of(map_coordinates), values_and_slopes_of(reference)
    for mode in MODES:
        (a, a_slopes), (b, b_slopes) = got[str((mode,))], want[str((mode,))]
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=mode)
        for which, x, y in zip(
            ["grid"] + [f"axis {k}" for k in range(len(shape))], a_slopes, b_slopes
        ):
            np.testing.assert_allclose(x, y, rtol=tol, atol=tol, err_msg=f"{mode}, {which}")


def test_enough_points_for_threads_match_jax():
    """2^17 points: past the size where the CPU kernels split the work between
    threads (chunks handed out on demand for the values; equal shares and a
    private grid per thread for the transpose)."""
    grid, coords = many_points((20, 21, 22), jnp.float64, count=1 << 17)
    got, got_slopes = values_and_slopes(map_coordinates, grid, coords, "wrap")
    want, want_slopes = values_and_slopes(reference, grid, coords, "wrap")
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    for a, b in zip(got_slopes, want_slopes):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)
    # The transpose's sums run in a fixed order: the same bits every time.
    again = values_and_slopes(map_coordinates, grid, coords, "wrap")[1][0]
    np.testing.assert_array_equal(again, got_slopes[0])


def test_many_points_under_vmap():
    grid, coords = many_points((9, 10, 11), jnp.float64)
    grids = jnp.stack([grid, 2 * grid, -grid])
    many = [jnp.stack([c, c[::-1], c + 0.5]) for c in coords]
    for in_axes, args in (
        ((0, None), (grids, coords)),
        ((None, 0), (grid, many)),
        ((0, 0), (grids, many)),
    ):
        got = jax.vmap(lambda g, c: map_coordinates(g, c, 1, "reflect"), in_axes=in_axes)(*args)
        want = jax.vmap(lambda g, c: reference(g, c, 1, "reflect"), in_axes=in_axes)(*args)
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13, err_msg=str(in_axes))


@functools.cache
def _programs(order, mode):
    """Jitted: the values, the gradient of a sum of their sines in the grid
    (the scatter) and in each coordinate array, and for the cubic the second
    and third derivatives along the last axis (differentiated weights)."""
    f = lambda g, c: map_coordinates(g, c, order, mode, 0.5)
    programs = {
        "values": jax.jit(f),
        "slopes": jax.jit(jax.grad(lambda g, c: jnp.sin(f(g, c)).sum(), argnums=(0, 1))),
    }
    if order == 3:  # the cubic's derivative weights have vector closed forms
        along = lambda g, c, last: f(g, [*c, last]).sum()
        second = jax.grad(
            lambda g, c, last: jax.grad(along, argnums=2)(g, c, last).sum(), argnums=2
        )
        programs["second"] = jax.jit(second)
        programs["third"] = jax.jit(
            jax.grad(lambda g, c, last: second(g, c, last).sum(), argnums=2)
        )
    return programs


def _outputs(grid, coords, order, mode):
    programs = _programs(order, mode)
    out = {"values": np.asarray(programs["values"](grid, coords))}
    slopes = programs["slopes"](grid, coords)
    for a, s in enumerate([slopes[0], *slopes[1]]):
        out[f"slope{a}"] = np.asarray(s)
    if order == 3:
        for name in ("second", "third"):
            out[name] = np.asarray(programs[name](grid, coords[:-1], coords[-1]))
    return out


def _host_has_avx2_and_fma() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    return "avx2" in flags and "fma" in flags


def _halves(size, count, dtype):
    """count coordinates cycling through k + 1/2 for every node k (and -1/2),
    and the number just below each: where lax.round turns from one node to
    the next (0.49999997 in float32: adding 1/2 first would round it up)."""
    half = np.arange(-1, size, dtype=dtype) + dtype(0.5)
    below = np.nextafter(half, dtype(-np.inf))
    return np.resize(np.stack([half, below], axis=1).reshape(-1), count)


@pytest.mark.parametrize("mode", ["constant", "mirror"])
def test_order_0_vector_kernel_is_the_scalar_path_bit_for_bit(mode, monkeypatch):
    """Order 0 reads one node a point and adds one cotangent into it: nothing
    to round, so the vector kernel (cpu_avx2_kernels.h, lax.round of the
    coordinates in vectors) must give the scalar path's bits, at and just
    below every half-integer and outside the grid too, values and gradients."""
    for dtype in (np.float32, np.float64):
        for shape in ((40,), (17, 23), (9, 10, 11)):
            grid, coords = many_points(shape, dtype, seed=len(shape))
            coords = [
                jnp.asarray(
                    np.where(
                        np.arange(c.size) % 3 == 0, _halves(size, c.size, dtype), np.asarray(c)
                    )
                )
                for c, size in zip(coords, shape)
            ]
            vector = _outputs(grid, coords, 0, mode)
            monkeypatch.setenv("XLABIND_NO_SIMD", "1")
            scalar = _outputs(grid, coords, 0, mode)
            monkeypatch.delenv("XLABIND_NO_SIMD")
            for name, value in vector.items():
                np.testing.assert_array_equal(
                    scalar[name], value, err_msg=f"{shape} {np.dtype(dtype).name} {name}"
                )
            expected = reference(grid, coords, 0, mode, 0.5)
            np.testing.assert_array_equal(vector["values"], np.asarray(expected))


# Orders 0 and 1: cpu_avx2_kernels.h; orders 2-5: cpu_avx2_spline_kernels.h (the
# cubic's weights in vectors, with closed forms for each derivative; the
# others' 3, 5 or 6 nodes a row in vectors loaded under a mask), which takes
# the points near the edges through every mode but constant (whose edges are
# scalar); the (3, 5, 2) grid has no interior, only edges.
@pytest.mark.parametrize(
    "order,mode",
    cases.some(
        "scalar path",
        [(1, "constant")]
        + [(3, m) for m in MODES]
        + [(2, "reflect"), (4, "wrap"), (5, "nearest"), (5, "constant")],
        sampled=5,
    ),
)
def test_the_scalar_path_agrees_with_the_vector_kernel(order, mode, monkeypatch):
    """XLABIND_NO_SIMD=1 turns the vector kernels off (the handler reads it at
    every call): the same executables then compute the values and
    derivatives the scalar way, which must agree to rounding. On a CPU with
    AVX2 and FMA the vector kernels must also have run: their fused
    multiply-adds round differently somewhere."""
    differs = []
    for dtype in (jnp.float32, jnp.float64):
        # Every rank for orders 1 and 3; the other splines share their code
        # but for the row's length, so 3-D (and no interior) is enough.
        shapes = (
            ((40,), (17, 23), (9, 10, 11), (3, 5, 2))
            if order in (1, 3)
            else ((9, 10, 11), (3, 5, 2))
        )
        for shape in shapes:
            grid, coords = many_points(shape, dtype, seed=len(shape))
            vector = _outputs(grid, coords, order, mode)
            monkeypatch.setenv("XLABIND_NO_SIMD", "1")
            scalar = _outputs(grid, coords, order, mode)
            monkeypatch.delenv("XLABIND_NO_SIMD")
            assert sorted(scalar) == sorted(vector)
            for name, value in vector.items():
                tol = 2e-5 if value.dtype == np.float32 else 1e-12
                # Third derivatives of float32 cubics are differences of large terms.
                scale = max(1.0, float(np.abs(value).max()))
                np.testing.assert_allclose(
                    scalar[name],
                    value,
                    rtol=tol,
                    atol=tol * scale,
                    err_msg=f"{shape} {np.dtype(dtype).name} {name}",
                )
                differs.append(not np.array_equal(scalar[name], value))
    if _host_has_avx2_and_fma():
        assert any(differs), "the vector kernels never ran: every result is bitwise the scalar one"


def test_lowers_for_cuda_to_the_cuda_kernels():
    grid, coords = problem((5, 6), jnp.float32)
    f = jax.jit(jax.grad(lambda g, c: map_coordinates(g, c, 1).sum()))
    text = f.trace(grid, coords).lower(lowering_platforms=("cuda",)).as_text()
    assert "@xlabind_map_coordinates_transpose(" in text


# -- a NaN or infinite cval marks the outside -----------------------------------

_MARKS = [np.nan, np.inf, -np.inf]


@pytest.mark.parametrize("order, cval", cases.product("marks", [0, 1], _MARKS, sampled=3))
def test_a_non_finite_cval_marks_only_the_outside_as_jax_does(order, cval):
    # Inside: the values; where a point reads a node outside: cval, as jax
    # (order 1 at n - 1 reads one, with weight 0: cval * 0).
    grid = jnp.asarray(np.random.default_rng(3).normal(size=(6, 7)))
    rows = jnp.asarray([-1.0, -0.5, -0.25, 0.0, 0.3, 2.5, 4.9, 5.0, 5.2, 7.0, 2.0])
    cols = jnp.asarray([3.0, 3.0, 3.0, 3.0, 6.0, 1.25, 6.0, 6.0, 2.0, 2.0, -0.7])
    got = np.asarray(map_coordinates(grid, [rows, cols], order, "constant", cval=cval))
    want = np.asarray(
        jax.scipy.ndimage.map_coordinates(grid, [rows, cols], order, "constant", cval=cval)
    )
    finite_cval = np.asarray(map_coordinates(grid, [rows, cols], order, "constant", cval=0.0))
    if order == 0:
        outside = (rows <= -0.5) | (rows >= 5.5) | (cols <= -0.5) | (cols >= 6.5)
    else:
        outside = (rows < 0) | (rows >= 5) | (cols < 0) | (cols >= 6)
    outside = np.asarray(outside)
    assert outside.any() and (~outside).any()
    np.testing.assert_allclose(got[~outside], finite_cval[~outside], rtol=1e-12)
    # Where jax has a number, the same; where it has NaN for an infinite cval
    # (0 * inf among its corners), cval, but at n - 1 (cval * a zero weight).
    same = ~np.isnan(want) | np.isnan(cval)
    np.testing.assert_allclose(got[same], want[same], rtol=1e-12)
    edge = np.asarray((rows == 5) | (cols == 6)) if order == 1 else np.zeros_like(outside)
    if np.isnan(cval):
        assert np.isnan(got[outside]).all()
    else:
        np.testing.assert_array_equal(got[outside & ~edge], cval)
        assert np.isnan(got[outside & edge]).all()


@pytest.mark.parametrize(
    "order, cval", cases.product("spline marks", [2, 3, 4, 5], _MARKS, sampled=4)
)
def test_a_non_finite_cval_at_spline_orders_is_scipys_constant_mode(order, cval):
    scipy_ndimage = pytest.importorskip("scipy.ndimage")
    grid = np.random.default_rng(4).normal(size=(7, 6))
    rows = np.linspace(-1.0, 7.0, 23)
    cols = np.linspace(5.5, -0.5, 23)
    got = np.asarray(
        map_coordinates(
            jnp.asarray(grid), [jnp.asarray(rows), jnp.asarray(cols)], order, "constant", cval=cval
        )
    )
    want = scipy_ndimage.map_coordinates(
        grid, [rows, cols], order=order, mode="constant", cval=cval
    )
    outside = (rows < 0) | (rows > 6) | (cols < 0) | (cols > 5)
    assert outside.any() and (~outside).any()
    np.testing.assert_allclose(got[~outside], want[~outside], rtol=1e-9, atol=1e-12)
    if np.isnan(cval):
        assert np.isnan(got[outside]).all()
    else:
        np.testing.assert_array_equal(got[outside], cval)


@pytest.mark.parametrize("order", [1, 3])
def test_a_non_finite_cval_under_jit_vmap_and_grad(order):
    grid = jnp.asarray(np.random.default_rng(5).normal(size=(9,)))
    coords = jnp.asarray([[-0.5, 1.25, 3.5], [7.75, 8.5, 2.0]])

    def f(g, c, cval):
        return map_coordinates(g, [c], order, "constant", cval=cval)

    # A traced cval: NaN, then finite, with one executable.
    batched = jax.jit(jax.vmap(f, (None, 0, None)))
    marked = np.asarray(batched(grid, coords, jnp.nan))
    plain = np.asarray(batched(grid, coords, 0.0))
    inside = np.asarray((coords >= 0) & (coords < 8))
    assert np.isnan(marked[~inside]).all()
    if order == 1:
        np.testing.assert_allclose(marked[inside], plain[inside], rtol=1e-12)
    np.testing.assert_allclose(
        plain, np.asarray(jax.vmap(lambda c: f(grid, c, 0.0))(coords)), rtol=1e-12
    )
    # Gradients inside stay finite (no NaN through the unselected branch).
    for cval in (np.nan, jnp.asarray(np.nan), np.inf):
        g = jax.grad(lambda c, cval=cval: jnp.sum(f(grid, c, cval)))(jnp.asarray([1.25, 3.5, 6.0]))
        assert np.isfinite(np.asarray(g)).all(), (cval, g)
        gg = jax.grad(lambda g, cval=cval: jnp.sum(f(g, jnp.asarray([1.25, 3.5, 6.0]), cval)))(grid)
        assert np.isfinite(np.asarray(gg)).all(), (cval, gg)


@pytest.mark.parametrize("ndim, order", [(4, 3), (6, 3), (8, 5)])
def test_float32_keeps_float32_accuracy_past_three_dimensions(ndim, order):
    # Past 3-D one general kernel sums all (k + 1)^ndim nodes; in float32 that
    # sum once drifted by thousands of roundings (1e-4 at 8-D, order 5).
    import scipy.ndimage

    rng = np.random.default_rng(ndim)
    grid = rng.normal(size=(order + 2,) * ndim).astype(np.float32)
    points = [rng.uniform(0.5, order + 0.5, size=16).astype(np.float32) for _ in range(ndim)]
    # SciPy in float64 on the same float32 values: the exact answer, nearly.
    want = scipy.ndimage.map_coordinates(
        grid.astype(np.float64),
        [p.astype(np.float64) for p in points],
        order=order,
        mode="mirror",
        prefilter=False,
    )
    got = map_coordinates(
        jnp.asarray(grid), [jnp.asarray(p) for p in points], order, "mirror", prefilter=False
    )
    # float32's weights, a few roundings each: well under 1e-6 of the values.
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * np.abs(grid).max())
