"""What only xlabind.ops' TPU formulation has: map_coordinates' routes
(tap table, patches, chunks of axis 2, gathers that fit), programs exported
for a chip, coordinates of any float32 magnitude, points in chunks and
symbolic point counts, cval traced and its gradient; spline_filter and its
matrix against SciPy; the Pallas kernels' own contract. The contract every
implementation holds (values at every order, mode and rank, both
gradients, no points, vmap) is tests/ops/test_map_coordinates.py, whose
"tpu" cases run the same formulation. tools/device_check.py runs this file on
a TPU chip; off a TPU the TPU lowering rule stands in for the CPU one and
the Pallas kernels run interpreted, so CI checks the same formulation's
numbers (not that the chip compiles it)."""

import fractions
import math
import re

import cases
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.ndimage as ndimage
from map_coordinates_table import MODES, SCIPY_MODE
from tpu_lowering import EXPORT_CHECKS, ON_TPU, tpu_rule_for_cpu_programs

from xlabind.ops import map_coordinates, spline_filter
from xlabind.ops.map_coordinates import tpu_formulation, tpu_kernels
from xlabind.ops.modes import Boundary
from xlabind.ops.spline_filter import tpu_formulation as spline_filter_tpu


@pytest.fixture(autouse=True, scope="module")
def tpu_rule():
    with tpu_rule_for_cpu_programs():
        yield


def grid_and_points(shape, points=300, seed=0, outside=3.0):
    rng = np.random.default_rng(seed)
    grid = rng.normal(size=shape).astype(np.float32)
    coords = [rng.uniform(-outside, n - 1 + outside, points).astype(np.float32) for n in shape]
    return grid, coords


def scipy_values(grid, coords, order, mode, cval=0.0, prefilter=True):
    if order <= 1:  # jax's meaning at orders 0 and 1 (rounding half away from zero)
        return np.asarray(
            jax.scipy.ndimage.map_coordinates(
                jax.device_put(grid.astype(np.float32), jax.devices("cpu")[0]),
                [jax.device_put(c, jax.devices("cpu")[0]) for c in coords],
                order,
                mode,
                cval,
            )
        )
    return ndimage.map_coordinates(
        grid.astype(np.float64),
        np.stack(coords).astype(np.float64),
        order=order,
        mode=SCIPY_MODE[mode],
        cval=cval,
        prefilter=prefilter,
    )


@pytest.mark.parametrize("order", [0, 1, 3])
def test_eager_one_dimensional_and_without_prefilter(order):
    grid, coords = grid_and_points((40,), seed=7)
    np.testing.assert_allclose(
        map_coordinates(grid, coords, order, "mirror", prefilter=False),
        scipy_values(grid, coords, order, "mirror", prefilter=False),
        rtol=2e-4,
        atol=2e-4,
    )


def test_traced_cval_and_its_gradient():
    grid, coords = grid_and_points((8, 9), seed=3)
    f = jax.jit(lambda cval: map_coordinates(grid, coords, 3, "constant", cval=cval))
    np.testing.assert_allclose(
        f(jnp.float32(1.5)),
        scipy_values(grid, coords, 3, "constant", cval=1.5),
        rtol=2e-4,
        atol=2e-4 * 3,
    )
    # The values are affine in cval: its derivative is the outside's weight.
    slope = jax.grad(lambda c: f(c).sum())(jnp.float32(1.5))
    np.testing.assert_allclose(slope, (f(jnp.float32(2.5)) - f(jnp.float32(1.5))).sum(), rtol=1e-3)


@pytest.mark.parametrize("route", ["tap table", "patches"])
def test_nan_and_infinite_coordinates(monkeypatch, route):
    if route == "patches":  # a NaN or infinite point's rows lie inside the patch table
        monkeypatch.setattr(tpu_kernels, "MAX_TABLE_BYTES", 0)
        if not ON_TPU:
            monkeypatch.setattr(tpu_kernels, "INTERPRET", True)
        jax.clear_caches()
    grid, _ = grid_and_points((6, 5), seed=2)
    xs = jnp.array([jnp.nan, jnp.inf, -jnp.inf, 2.5], jnp.float32)
    ys = jnp.full(4, 1.5, jnp.float32)
    nearest = map_coordinates(grid, [xs, ys], 1, "nearest")
    assert np.isnan(nearest[0]) and np.isfinite(nearest[1:]).all()
    np.testing.assert_allclose(nearest[1], 0.5 * (grid[5, 1] + grid[5, 2]), rtol=1e-5)
    assert np.isnan(map_coordinates(grid, [xs, ys], 3, "wrap")[:3]).all()


@pytest.mark.parametrize(
    "order, mode",
    cases.product("spline filter", (2, 3, 4, 5), ("mirror", "reflect", "wrap"), sampled=4),
)
def test_spline_filter_agrees_with_scipy(order, mode):
    x = np.random.default_rng(order).normal(size=(11, 13)).astype(np.float32)
    scipy_mode = {"wrap": "grid-wrap"}.get(mode, mode)
    np.testing.assert_allclose(
        jax.jit(lambda x: spline_filter(x, order, mode))(x),
        ndimage.spline_filter(x.astype(np.float64), order, mode=scipy_mode),
        rtol=1e-4,
        atol=1e-4,
    )


def test_filter_matrix_inverts_the_collocation():
    matrix = spline_filter_tpu.filter_matrix(9, 3, Boundary.REFLECT)
    samples = np.random.default_rng(0).normal(size=9)
    np.testing.assert_allclose(
        matrix @ samples, ndimage.spline_filter1d(samples, 3, mode="reflect"), atol=1e-12
    )


# The kernels below run interpreted off a TPU: the module's tpu_rule fixture
# (tests/support/tpu_lowering.py) sets tpu_kernels.INTERPRET there.
# 8 taps: 16 cells to a row.
ROW = [0, 39, 17, 3, 3, 21]
SUB = [0, 15, 7, 4, 4, 9]


def test_the_kernel_reads_each_points_cell():
    packed = jnp.arange(40 * 128, dtype=jnp.float32).reshape(40, 128)
    row, sub = jnp.array(ROW, jnp.int32), jnp.array(SUB, jnp.int32)
    taps = jax.jit(tpu_kernels.gather_packed_rows, static_argnums=1)(packed, 8, row, sub)
    np.testing.assert_array_equal(taps, np.asarray(packed).reshape(40, 16, 8)[ROW, SUB].T)


# 40 rows: one page of sums; 3 * 2^13 + 8 rows: 3 pages of 2^13 rows
# (tpu_kernels._PAGE_BITS) and a part-filled fourth, points on each side of
# each seam.
@pytest.mark.parametrize(
    "rows, row",
    [(40, ROW), (3 * 2**13 + 8, [0, 2**13 - 1, 2**13, 2**13, 2**14 + 1, 3 * 2**13 + 7])],
)
def test_the_scatter_kernel_adds_each_points_taps_in_order(rows, row):
    contribution = jnp.arange(8 * len(row), dtype=jnp.float32).reshape(8, -1)
    sums = jax.jit(tpu_kernels.scatter_packed_rows, static_argnums=3)(
        contribution, jnp.array(row, jnp.int32), jnp.array(SUB, jnp.int32), rows
    )
    expected = np.zeros((rows, 16, 8), np.float32)
    np.add.at(expected, (np.array(row), np.array(SUB)), np.asarray(contribution).T)
    np.testing.assert_array_equal(sums, expected.reshape(rows, 128))


@pytest.mark.parametrize(
    "spatial, k", [((50,), 1), ((30,), 3), ((13, 21), 1), ((11, 9), 3), ((7, 9, 10), 1)]
)
def test_the_packed_table_holds_each_cells_taps_where_the_kernels_read_them(spatial, k):
    """packed_tap_table read at packed_position is tap_table, for each cell
    of each grid of a batch."""
    ext = np.random.default_rng(k).normal(size=(2, *spatial)).astype(np.float32)
    packed = np.asarray(tpu_formulation.packed_tap_table(jnp.asarray(ext), k))
    assert packed.shape == (tpu_formulation.packed_table_rows(2, spatial, k), 128)
    cells = [m - k for m in spatial]
    firsts = np.indices((2, *cells)).reshape(1 + len(spatial), 2, -1)[1:]
    row, sub = tpu_formulation.packed_position(list(jnp.asarray(firsts)), spatial, k)
    taps = (k + 1) ** len(spatial)
    read = packed.reshape(len(packed), -1, taps)[row, sub].T
    want = np.concatenate([np.asarray(tpu_formulation.tap_table(e, k)) for e in ext], axis=1)
    np.testing.assert_array_equal(read, want)


@pytest.mark.parametrize("k", cases.some("patch kernels", range(6), sampled=3))
def test_the_patch_kernels_read_and_add_each_points_nodes(k):
    """gather_patches reads a point's (k + 1)^2 nodes of the first two axes
    from its patch row (at every row offset); scatter_patches adds them back."""
    rng = np.random.default_rng(k)
    grids = rng.normal(size=(2, 19, 23, 3)).astype(np.float32)
    counts = tpu_kernels.patch_counts((19, 23), k)
    points = 41
    lead, c0, c1 = (
        rng.integers(0, 2, points),
        rng.integers(0, 19 - k, points),
        rng.integers(0, 23 - k, points),
    )
    rest = rng.integers(0, 2, points)
    row, lane = tpu_kernels.patch_position(lead, c0, c1, rest, 3, k, counts)
    row, lane = jnp.asarray(row, jnp.int32), jnp.asarray(lane, jnp.int32)
    offsets = (0, 1)
    table = jax.jit(tpu_kernels.patch_table, static_argnums=1)(grids, k)
    read = jax.jit(tpu_kernels.gather_patches, static_argnums=(3, 4))
    got = read(table, row, lane, offsets, k)
    contribution = rng.normal(size=got.shape).astype(np.float32)
    sums = jax.jit(tpu_kernels.scatter_patches, static_argnums=(3, 4, 5))(
        contribution, row, lane, offsets, k, table.shape[0]
    )
    nodes = [(a, b, r) for a in range(k + 1) for b in range(k + 1) for r in offsets]
    want = np.stack([grids[lead, c0 + a, c1 + b, rest + r] for a, b, r in nodes])
    np.testing.assert_array_equal(got, want)
    # The scatter is the gather's transpose: <scatter(c), t> == <c, gather(t)>.
    probe = rng.normal(size=table.shape).astype(np.float32)
    gathered = read(probe, row, lane, offsets, k)
    np.testing.assert_allclose(np.vdot(sums, probe), np.vdot(contribution, gathered), rtol=1e-5)


@pytest.mark.parametrize("k", cases.some("patch table transpose", [0, 1, 3, 5], sampled=2))
def test_the_patch_tables_transpose_is_its_derivative(k):
    """patch_table's hand-made transpose (sums of reshaped runs) is its
    transpose: <pullback(c), g> == <c, table(g)> for a linear map."""
    rng = np.random.default_rng(k)
    grids = jnp.asarray(rng.normal(size=(2, 12, 17, 2)).astype(np.float32))
    table, pullback = jax.vjp(lambda g: tpu_kernels.patch_table(g, k), grids)
    cotangent = jnp.asarray(rng.normal(size=table.shape).astype(np.float32))
    (got,) = pullback(cotangent)
    np.testing.assert_allclose(jnp.vdot(got, grids), jnp.vdot(cotangent, table), rtol=1e-5)


@pytest.mark.parametrize(
    "case",
    cases.some(
        "patches",
        [
            ((9, 8, 7), 1, "nearest"),
            ((9, 8, 7), 5, "wrap"),
            ((12, 10), 2, "mirror"),  # one row a point
            ((5, 6, 4, 3), 3, "reflect"),  # 16 rows a point
            ((9, 8, 7), 3, "mirror", 3),  # three chunks of axis 2
            ((5, 6, 9, 3), 2, "nearest", 2),
        ],
        sampled=3,
    ),
    ids=str,
)
def test_a_table_too_large_for_the_kernel_is_read_in_patches(monkeypatch, case):
    """A grid whose tap table does not fit (256^3 on a v5e) is read from
    patches of its first two axes, and one whose patch table does not fit
    either (order 3 at 256^3) from one patch table per chunk of axis 2:
    values as SciPy's, and the grid's gradient through the patch scatters
    is the transpose."""
    shape, order, mode, chunks = (*case, 1)[:4]
    monkeypatch.setattr(tpu_kernels, "MAX_TABLE_BYTES", 0)
    monkeypatch.setattr(tpu_kernels, "MAX_SCATTER_TABLE_BYTES", 0)
    if chunks > 1:  # vector memory for 1/chunks of axis 2's cells, plus the k nodes they share
        patch_chunks = tpu_formulation._patch_chunks

        def limited(ext_shape, k):
            table_bytes = tpu_kernels.patch_table_bytes(ext_shape[0], ext_shape[1:], k)
            room = -(-(ext_shape[3] - k) // chunks) + k
            monkeypatch.setattr(
                tpu_kernels, "MAX_PATCH_TABLE_BYTES", room * table_bytes // ext_shape[3]
            )
            return patch_chunks(ext_shape, k)

        monkeypatch.setattr(tpu_formulation, "_patch_chunks", limited)
    if not ON_TPU:
        monkeypatch.setattr(tpu_kernels, "INTERPRET", True)
    taken = []
    for name in ("gather_patches", "scatter_patches"):
        kernel = getattr(tpu_kernels, name)
        monkeypatch.setattr(
            tpu_kernels,
            name,
            lambda *a, _k=kernel, _n=name, **kw: taken.append(_n) or _k(*a, **kw),
        )
    grid, coords = grid_and_points(shape, seed=11)
    jax.clear_caches()
    f = jax.jit(lambda g: map_coordinates(g, coords, order, mode))
    got = f(grid)
    np.testing.assert_allclose(
        got, scipy_values(grid, coords, order, mode), rtol=2e-4, atol=2e-4 * 4
    )
    weights = np.random.default_rng(2).normal(size=got.shape).astype(np.float32)
    gradient = jax.jit(jax.grad(lambda g: jnp.vdot(f(g), weights)))(grid)
    probe = np.random.default_rng(3).normal(size=shape).astype(np.float32)
    np.testing.assert_allclose(np.vdot(gradient, probe), np.vdot(f(probe), weights), rtol=2e-4)
    assert taken.count("scatter_patches") == chunks
    assert taken.count("gather_patches") % chunks == 0 and taken.count("gather_patches") >= chunks


@pytest.mark.parametrize(
    "max_taps, route", [(64, "whole"), (16, "slabs"), (8, "per node")], ids=str
)
def test_wide_tables_beyond_the_kernels_take_the_gather_that_fits(monkeypatch, max_taps, route):
    """Without the kernels (a table too large for vector memory), rows wider
    than MAX_GATHER_TAPS are not gathered whole (on a v5e that asked for
    66 GB at order 3): 64 taps go through the 16-tap slabs, or node by node."""
    monkeypatch.setattr(tpu_kernels, "MAX_TABLE_BYTES", 0)
    monkeypatch.setattr(tpu_kernels, "MAX_PATCH_TABLE_BYTES", 0)
    monkeypatch.setattr(tpu_formulation, "MAX_GATHER_TAPS", max_taps)
    widths = []
    gather = tpu_formulation._gather
    monkeypatch.setattr(
        tpu_formulation, "_gather", lambda t, c: widths.append(t.shape[0]) or gather(t, c)
    )
    grid, coords = grid_and_points((9, 8, 7), seed=12)
    jax.clear_caches()
    got = jax.jit(lambda g, c: map_coordinates(g, c, 3, "mirror"))(grid, coords)
    assert widths == {"whole": [64], "slabs": [16], "per node": []}[route]
    np.testing.assert_allclose(
        got, scipy_values(grid, coords, 3, "mirror"), rtol=2e-4, atol=2e-4 * 4
    )


@pytest.mark.parametrize("order", cases.some("several dimensions", [1, 3], sampled=1))
def test_coordinate_arrays_of_several_dimensions(order):
    """(H, W) coordinates (image resampling): rows are the kernels' batch,
    the grid broadcast over them; values, both gradients, as SciPy's."""
    grid, flat = grid_and_points((9, 8), points=6 * 7, seed=order)
    coords = [c.reshape(6, 7) for c in flat]
    f = jax.jit(lambda g, a, b: map_coordinates(g, [a, b], order, "reflect"))
    got = f(grid, *coords)
    assert got.shape == (6, 7)
    want = scipy_values(grid, flat, order, "reflect").reshape(6, 7)
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4 * 4)
    grid_grad = jax.jit(jax.grad(lambda g: f(g, *coords).sum()))(grid)
    flat_grad = jax.jit(jax.grad(lambda g: map_coordinates(g, flat, order, "reflect").sum()))(grid)
    np.testing.assert_allclose(grid_grad, flat_grad, rtol=1e-5, atol=1e-5)


def exported_for_a_tpu(f, *args):
    """The StableHLO text of jit(f) exported for a TPU, from whatever machine runs the tests."""
    exported = jax.export.export(jax.jit(f), platforms=("tpu",), disabled_checks=EXPORT_CHECKS)
    return exported(*args).mlir_module()


@pytest.mark.parametrize(
    "order, mode, route",
    cases.some(
        "exported",
        [
            *[(order, MODES[order % len(MODES)], "tap table") for order in range(6)],
            (1, "wrap", "patches"),
            (4, "nearest", "patches"),
        ],
        sampled=4,
    ),
    ids=str,
)
def test_a_program_exported_for_a_tpu_runs_the_chips_kernels(monkeypatch, order, mode, route):
    """The formulation is lowered only for TPU programs, so its kernels are
    the chip's (Mosaic), not interpreted, whichever machine lowers it: a CPU
    exporting for a TPU too, where Pallas must not ask for the chip's
    description. Forward, both gradients and the prefilter."""
    monkeypatch.setattr(tpu_kernels, "INTERPRET", False)
    if route == "patches":
        monkeypatch.setattr(tpu_kernels, "MAX_TABLE_BYTES", 0)
        monkeypatch.setattr(tpu_kernels, "MAX_SCATTER_TABLE_BYTES", 0)
    jax.clear_caches()
    grid = jax.ShapeDtypeStruct((9, 8, 7), jnp.float32)
    coords = jax.ShapeDtypeStruct((3, 300), jnp.float32)
    f = lambda g, c: map_coordinates(g, list(c), order, mode).sum()
    programs = {
        "forward": exported_for_a_tpu(f, grid, coords),
        "grid gradient": exported_for_a_tpu(jax.grad(f), grid, coords),
    }
    if order > 0:  # order 0 is flat in the coordinates
        programs["coordinate gradient"] = exported_for_a_tpu(jax.grad(f, 1), grid, coords)
    kernels = {what: text.count("tpu_custom_call") for what, text in programs.items()}
    assert all(count >= 1 for count in kernels.values()), kernels
    assert all("stablehlo.gather" not in text for text in programs.values())


@pytest.mark.parametrize("route", ["tap table", "patches"])
def test_the_kernels_lower_for_a_tpu_with_64_bit_types_on(monkeypatch, route):
    """Under jax_enable_x64 a Python int is an int64: the kernels' index
    arithmetic stays int32, as Mosaic requires of a shift's operands
    ("'arith.shrui' op requires the same type for all operands"). Forward
    and both gradients."""
    monkeypatch.setattr(tpu_kernels, "INTERPRET", False)
    if route == "patches":
        monkeypatch.setattr(tpu_kernels, "MAX_TABLE_BYTES", 0)
        monkeypatch.setattr(tpu_kernels, "MAX_SCATTER_TABLE_BYTES", 0)
    grid = jax.ShapeDtypeStruct((9, 8, 7), jnp.float32)
    coords = jax.ShapeDtypeStruct((3, 300), jnp.float32)
    f = lambda g, c: map_coordinates(g, list(c), 1, "nearest").sum()
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    jax.clear_caches()
    try:
        programs = [exported_for_a_tpu(fn, grid, coords) for fn in (f, jax.grad(f), jax.grad(f, 1))]
    finally:
        jax.config.update("jax_enable_x64", previous)
        jax.clear_caches()
    assert all(text.count("tpu_custom_call") >= 1 for text in programs)


PERIODS = {"wrap": lambda n: n, "mirror": lambda n: 2 * n - 2, "reflect": lambda n: 2 * n}


def huge_and_boundary_coordinates(n, seed=0):
    """float32 coordinates of every magnitude: random exponents up to the
    largest float, both signs, and the edges of int32 and of float32's
    integers, with their values' coordinates within one period (exact:
    the modes are periodic)."""
    rng = np.random.default_rng(seed)
    exponents = rng.integers(-2, 128, 200)
    at = rng.uniform(-1, 1, 200) * 2.0**exponents
    edges = [3 * 2**40, 95 * 2**33, 2**31, 2**31 - 1, 2**30, 2**24 + 2, 2**23 + 0.5, 3.4e38]
    at = np.concatenate([at, edges, np.negative(edges), [12062151, 2**23 - 0.5]])
    return at.astype(np.float32)


def within_one_period(at, period):
    """Each coordinate minus a multiple of `period`, exactly (as rationals)."""
    reduced = []
    for c in at.astype(np.float64):
        q = fractions.Fraction(c)
        reduced.append(float(q - period * math.floor(q / period)))
    return np.asarray(reduced)


@pytest.mark.parametrize(
    "order, mode", cases.product("huge", range(6), ("wrap", "mirror", "reflect"), sampled=6)
)
def test_huge_coordinates_reduce_exactly_by_the_period(order, mode):
    """Every float32 coordinate has its value ("Every coordinate has a value"
    in docs/guides/interpolation.md): that of the same point moved into the
    first period. A float remainder is not exact on a TPU for huge
    operands, and c + 0.5 rounds from 2^23 on (even orders' nearest node)."""
    grid = np.random.default_rng(order).normal(size=11).astype(np.float32)
    at = huge_and_boundary_coordinates(11, seed=order)
    got = jax.jit(lambda g, c: map_coordinates(g, [c], order, mode))(grid, at)
    if order == 0:  # rounded half away from zero first: not the same when moved across 0
        at64 = at.astype(np.float64)
        at = np.sign(at64) * np.floor(np.abs(at64) + 0.5)
    moved = within_one_period(at, PERIODS[mode](11))
    expected = scipy_values(grid, [moved], order, mode)
    np.testing.assert_allclose(got, expected, rtol=2e-4, atol=2e-4 * np.abs(grid).max())


@pytest.mark.parametrize("mode", ["wrap", "mirror", "reflect"])
def test_the_period_is_taken_without_a_float_remainder(monkeypatch, mode):
    """XLA's float remainder on a TPU is not exact for huge operands (3 *
    2^40 wrapped onto 0.0 there): the program a TPU runs reduces the
    coordinates in integers."""
    monkeypatch.setattr(tpu_kernels, "INTERPRET", False)
    jax.clear_caches()
    text = exported_for_a_tpu(
        lambda g, c: map_coordinates(g, [c], 3, mode),
        jax.ShapeDtypeStruct((11,), jnp.float32),
        jax.ShapeDtypeStruct((300,), jnp.float32),
    )
    remainders = [line for line in text.splitlines() if "stablehlo.remainder" in line]
    assert remainders and not [line for line in remainders if re.search(r"f(32|64)>", line)]


def test_a_symbolic_point_count_exports_for_a_tpu(monkeypatch):
    """docs/semantics.md's example ("Export and symbolic shapes") exported
    for a TPU: the formulation never compares the symbolic point count with
    a block of points (jax: "inconclusive"), forward and grid gradient."""
    monkeypatch.setattr(tpu_kernels, "INTERPRET", False)
    jax.clear_caches()
    (n,) = jax.export.symbolic_shape("n")
    grid = jax.ShapeDtypeStruct((8, 8), jnp.float32)
    at = jax.ShapeDtypeStruct((n,), jnp.float32)
    sample = lambda g, i, j: map_coordinates(g, [i, j], order=1)
    forward = exported_for_a_tpu(sample, grid, at, at)
    gradient = exported_for_a_tpu(jax.grad(lambda g, i, j: sample(g, i, j).sum()), grid, at, at)
    assert "tpu_custom_call" in forward and "tpu_custom_call" in gradient


@pytest.mark.parametrize("points", cases.some("symbolic points", [3, 5000], sampled=1))
def test_a_symbolic_point_count_has_the_values_of_a_known_one(monkeypatch, points):
    """The same program exported for this machine (off a chip: the CPU, with
    the TPU rule and its kernels interpreted): the points run in chunks of a fixed size (here
    2048: 5000 points take three, the last one padded), values and grid
    gradient as the program for the known count."""
    monkeypatch.setattr(tpu_formulation, "SYMBOLIC_CHUNK_POINTS", 2048, raising=False)
    jax.clear_caches()
    (n,) = jax.export.symbolic_shape("n")
    grid, (i, j) = grid_and_points((9, 8), points=points, seed=4)
    weights = np.random.default_rng(5).normal(size=points).astype(np.float32)
    sample = jax.jit(lambda g, i, j: map_coordinates(g, [i, j], 1, "nearest"))
    pulled = jax.jit(jax.grad(lambda g, i, j, w: jnp.vdot(sample(g, i, j), w)))
    at = jax.ShapeDtypeStruct((n,), jnp.float32)
    g = jax.ShapeDtypeStruct(grid.shape, jnp.float32)
    # Exported for the machine's own platform: on a chip, the TPU program runs there.
    export = lambda f, *args: jax.export.export(
        f, platforms=(jax.default_backend(),), disabled_checks=EXPORT_CHECKS
    )(*args)
    np.testing.assert_allclose(
        export(sample, g, at, at).call(grid, i, j), sample(grid, i, j), rtol=1e-6, atol=1e-6
    )
    np.testing.assert_allclose(
        export(pulled, g, at, at, at).call(grid, i, j, weights),
        pulled(grid, i, j, weights),
        rtol=1e-5,
        atol=1e-5,
    )


def test_symbolic_rows_of_points_export_with_the_values_of_known_ones(monkeypatch):
    """Image-shaped coordinates (2, r, 128) with a symbolic row count: the
    program lowers for a TPU, and exported for this machine (off a chip the
    TPU rule, kernels interpreted) gives the values and grid gradient of the
    known shape."""
    monkeypatch.setattr(tpu_formulation, "SYMBOLIC_CHUNK_POINTS", 2048)
    jax.clear_caches()
    grid, flat = grid_and_points((9, 8), points=3 * 128, seed=6)
    image = np.stack(flat).reshape(2, 3, 128)
    sample = jax.jit(lambda g, c: map_coordinates(g, list(c), 1, "nearest"))
    pulled = jax.jit(jax.grad(lambda g, c: (sample(g, c) ** 2).sum()))
    (r,) = jax.export.symbolic_shape("r")
    g, c = (
        jax.ShapeDtypeStruct(grid.shape, jnp.float32),
        jax.ShapeDtypeStruct((2, r, 128), jnp.float32),
    )
    export = lambda f: jax.export.export(
        f, platforms=(jax.default_backend(),), disabled_checks=EXPORT_CHECKS
    )(g, c)
    np.testing.assert_allclose(
        export(sample).call(grid, image), sample(grid, image), rtol=1e-6, atol=1e-6
    )
    np.testing.assert_allclose(
        export(pulled).call(grid, image), pulled(grid, image), rtol=1e-5, atol=1e-5
    )
    monkeypatch.setattr(tpu_kernels, "INTERPRET", False)
    jax.clear_caches()
    assert "tpu_custom_call" in exported_for_a_tpu(pulled, g, c)


def test_a_symbolic_grid_shape_is_refused_by_name():
    """The tables are made for the grid's shape: a symbolic one is a clear error."""
    (n,) = jax.export.symbolic_shape("n")
    at = jax.ShapeDtypeStruct((5,), jnp.float32)
    with pytest.raises(NotImplementedError, match="grid's shape must be known"):
        exported_for_a_tpu(
            lambda g, i, j: map_coordinates(g, [i, j], 1),
            jax.ShapeDtypeStruct((n, 8), jnp.float32),
            at,
            at,
        )


@pytest.mark.parametrize("order", cases.some("image-shaped", [1, 3], sampled=1))
def test_image_shaped_coordinates_take_the_flat_points_path(monkeypatch, order):
    """(3, 32, 32) coordinates are rows over one grid: the grid gradient
    folds them into one flat run of points, the program a TPU runs takes the
    same kernels as for (3, 1024) (no XLA scatter per node: 7x slower on a
    v5e for 2^20 points at order 1), and the values agree."""
    grid, flat = grid_and_points((9, 8, 7), points=1024, seed=order)
    flat = np.stack(flat)
    image = flat.reshape(3, 32, 32)
    gradient = lambda g, c: jax.grad(lambda g: map_coordinates(g, list(c), order, "mirror").sum())(
        g
    )
    np.testing.assert_allclose(
        jax.jit(gradient)(grid, image), jax.jit(gradient)(grid, flat), rtol=1e-5, atol=1e-5
    )
    monkeypatch.setattr(tpu_kernels, "INTERPRET", False)
    jax.clear_caches()
    programs = [
        exported_for_a_tpu(gradient, jax.ShapeDtypeStruct(grid.shape, jnp.float32), c)
        for c in (
            jax.ShapeDtypeStruct(image.shape, jnp.float32),
            jax.ShapeDtypeStruct(flat.shape, jnp.float32),
        )
    ]
    ops = [(text.count("tpu_custom_call"), text.count("stablehlo.scatter")) for text in programs]
    assert ops[0] == ops[1] and ops[1][0] >= 1, ops


def test_rows_of_a_width_off_the_lanes_run_padded_to_whole_lanes():
    """(2, 3, 1000) coordinates (an image 1000 wide) run as one flat run of
    rows padded to 1024 points (a v5e compiled the unpadded flattening in
    1.8x the time): the values and both gradients are the flat points', and
    the TPU program's run is 3 * 1024 points long."""
    grid, flat = grid_and_points((9, 8), points=3000, seed=5)
    flat = np.stack(flat)
    rows = flat.reshape(2, 3, 1000)
    f = lambda g, c: map_coordinates(g, list(c), 1, "wrap")
    both = jax.jit(jax.grad(lambda g, c: (f(g, c) ** 2).sum(), (0, 1)))
    np.testing.assert_allclose(
        jax.jit(f)(grid, rows), jax.jit(f)(grid, flat).reshape(3, 1000), rtol=1e-6, atol=1e-6
    )
    for got, want in zip(both(grid, rows), both(grid, flat)):
        np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-5)
    for program in (f, lambda g, c: jax.grad(lambda g: f(g, c).sum())(g)):
        text = exported_for_a_tpu(
            program,
            jax.ShapeDtypeStruct(grid.shape, jnp.float32),
            jax.ShapeDtypeStruct(rows.shape, jnp.float32),
        )
        assert (1, 3 * 1024) in [dims for dims, _ in tensor_types(text)], text[:2000]


def tensor_types(text):
    """Every tensor type a StableHLO text names: (its dimensions, element type)."""
    found = re.findall(r"tensor<((?:\d+x)*)([a-z]+\d*)>", text)
    return [(tuple(int(d) for d in dims.split("x") if d), element) for dims, element in found]


def reshapes_that_merge_taps_over_points(text, points):
    """Reshapes of (a, b, ..., points) with two or more of a, b, ... above 1
    into (a * b * ..., points)."""
    merged = []
    pattern = r"stablehlo\.reshape .*\(tensor<([\dx]+)x\w+>\) -> tensor<([\dx]+)x\w+>"
    for before, after in re.findall(pattern, text):
        a, b = [tuple(int(d) for d in t.split("x")) for t in (before, after)]
        taps = [d for d in a[:-1] if d > 1]
        if len(b) == 2 and a[-1] == b[-1] >= points and len(taps) >= 2:
            merged.append((a, b))
    return merged


@pytest.mark.parametrize(
    "side, order, gradient", [(64, 1, False), (64, 3, True), (256, 1, True)], ids=str
)
def test_many_points_run_in_chunks_of_bounded_size(monkeypatch, side, order, gradient):
    """2^24 points lowered for a TPU (shapes only: nothing is allocated):
    no temporary grows past the coordinates' own size and one chunk's
    (taps, points) arrays (the tap weights, 4 GiB at order 3, are made a
    chunk at a time), and no reshape moves a chunk's taps past its points
    (measured on a v5e: XLA's compile time grew with the points through
    it, 132 s at 2^24 points for order 1, the program never finishing)."""
    monkeypatch.setattr(tpu_kernels, "INTERPRET", False)
    jax.clear_caches()
    points = 1 << 24
    f = lambda g, c: map_coordinates(g, list(c), order, "mirror").sum()
    text = exported_for_a_tpu(
        jax.grad(f) if gradient else f,
        jax.ShapeDtypeStruct((side,) * 3, jnp.float32),
        jax.ShapeDtypeStruct((3, points), jnp.float32),
    )
    largest = max(math.prod(dims) for dims, _ in tensor_types(text))
    assert largest <= max(3 * points, tpu_formulation.CHUNK_ELEMENTS), largest
    assert reshapes_that_merge_taps_over_points(text, tpu_kernels.BLOCK_POINTS) == []


@pytest.mark.parametrize(
    "order, shape", cases.some("chunks", [(1, (12, 10)), (3, (9, 8, 7))], sampled=1), ids=str
)
def test_points_in_chunks_keep_their_values_and_gradients(monkeypatch, order, shape):
    """Chunks of 2048 or 4096 points (CHUNK_ELEMENTS made small), the last
    one padded: values as SciPy's, the grid gradient the transpose."""
    monkeypatch.setattr(tpu_formulation, "CHUNK_ELEMENTS", 8 * 2048)
    chunkings = []
    chunked = tpu_formulation._chunked
    monkeypatch.setattr(
        tpu_formulation, "_chunked", lambda a, c: chunkings.append(c) or chunked(a, c)
    )
    jax.clear_caches()
    grid, coords = grid_and_points(shape, points=5000, seed=order)
    f = jax.jit(lambda g: map_coordinates(g, coords, order, "reflect"))
    np.testing.assert_allclose(
        f(grid), scipy_values(grid, coords, order, "reflect"), rtol=2e-4, atol=2e-4 * 4
    )
    assert chunkings and all(count * size >= 5000 and count > 1 for count, size in chunkings)
    weights = np.random.default_rng(2).normal(size=5000).astype(np.float32)
    gradient = jax.jit(jax.grad(lambda g: jnp.vdot(f(g), weights)))(grid)
    probe = np.random.default_rng(3).normal(size=shape).astype(np.float32)
    np.testing.assert_allclose(np.vdot(gradient, probe), np.vdot(f(probe), weights), rtol=2e-4)
