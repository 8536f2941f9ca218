"""The native-op groups: xlabind.ops.map_coordinates against jax's (order 1)
and against SciPy and a jnp gather (orders 2-5), values and gradients; the
grid-size sweep and the per-order table. Each group is timed apart from the
others (main.py)."""

from __future__ import annotations

from collections.abc import Callable

from harness import Case, Ready, jax, jnp, np


# -- native ops (their own, slower section) ----------------------------------
def map_coordinates_problem(side: int, points: int, seed: int):
    """A side^3 float64 grid and `points` random points inside it."""
    rng = np.random.default_rng(seed)
    grid = jnp.asarray(rng.standard_normal((side, side, side)))
    coords = [jnp.asarray(rng.uniform(0.0, side - 1.0, points)) for _ in range(3)]
    return grid, coords


def _map_coordinates_values(grid: jax.Array, coords: list[jax.Array], tag: str) -> list[Case]:
    """Ours and jax's values at `coords`, order 1, as two cases keyed by `tag`."""
    from jax.scipy.ndimage import map_coordinates as jax_map

    from xlabind.ops import map_coordinates as ours

    expected = np.asarray(jax_map(grid, coords, 1))
    cases = []
    for who, f in (("xlabind", ours), ("jax", jax_map)):
        # The coordinates are arguments, not constants XLA could fold the work into.
        forward = jax.jit(lambda g, c, f=f: f(g, c, 1))
        cases.append(
            Case(
                f"{tag}_{who}",
                f"{tag}, {who}",
                lambda g, forward=forward: forward(g, coords),
                grid,
                expected,
            )
        )
    return cases


def map_coordinates_groups() -> list[list[Case]]:
    """xlabind.ops.map_coordinates against jax.scipy.ndimage.map_coordinates, on
    2^20 points in a 64^3 float64 grid, order 1: the values and the gradient in
    the grid (a scatter-add in both), as two groups to be measured apart."""
    from jax.scipy.ndimage import map_coordinates as jax_map

    from xlabind.ops import map_coordinates as ours

    grid, coords = map_coordinates_problem(64, 1 << 20, seed=64)
    grad_expected = np.asarray(jax.grad(lambda g: jax_map(g, coords, 1).sum())(grid))
    gradients = []
    for who, f in (("xlabind", ours), ("jax", jax_map)):
        grad = jax.jit(jax.grad(lambda g, c, f=f: f(g, c, 1).sum()))
        gradients.append(
            Case(
                f"map_coordinates_grad_{who}",
                f"map_coordinates grad in input, {who}",
                lambda g, grad=grad: grad(g, coords),
                grid,
                grad_expected,
            )
        )
    return [_map_coordinates_values(grid, coords, "map_coordinates"), gradients]


def _cubic_by_gathers(coefficients: jax.Array, coords: list[jax.Array]) -> jax.Array:
    """The pure-jnp reference: order-3 B-spline interpolation of coefficients
    already filtered (mirror mode), each point's 4^3 = 64 nodes gathered
    with their weights. What a user writes without xlabind."""
    n = coefficients.shape
    weights, indices = [], []
    for axis, c in enumerate(coords):
        base = jnp.floor(c)
        t = c - base
        w = jnp.stack(
            [
                (1 - t) ** 3 / 6,
                (3 * t**3 - 6 * t**2 + 4) / 6,
                (-3 * t**3 + 3 * t**2 + 3 * t + 1) / 6,
                t**3 / 6,
            ],
            axis=-1,
        )
        period = 2 * (n[axis] - 1)
        i = jnp.mod(base.astype(jnp.int32)[:, None] + jnp.arange(-1, 3, dtype=jnp.int32), period)
        indices.append(jnp.where(i >= n[axis], period - i, i))
        weights.append(w)
    flat = (
        indices[0][:, :, None, None] * (n[1] * n[2])
        + indices[1][:, None, :, None] * n[2]
        + indices[2][:, None, None, :]
    )
    w = weights[0][:, :, None, None] * weights[1][:, None, :, None] * weights[2][:, None, None, :]
    return jnp.sum(coefficients.reshape(-1)[flat] * w, axis=(1, 2, 3))


def _scipy_spline(host_coords: np.ndarray, order: int) -> Callable[[jax.Array], Ready]:
    """SciPy's map_coordinates of `order` (mirror, its prefilter) at
    host_coords, as a case's function."""
    import scipy.ndimage

    return lambda g: Ready(
        scipy.ndimage.map_coordinates(np.asarray(g), host_coords, order=order, mode="mirror")
    )


def spline_groups() -> list[list[Case]]:
    """xlabind.ops.map_coordinates of order 3 (mirror) on 2^20 points in a 64^3
    float64 grid: the values against SciPy's (prefilter included on both
    sides) and the pure-jnp reference above (given the coefficients: its
    prefilter not timed), then the gradient in the grid against the
    reference's (xlabind's through the prefilter's transpose too)."""
    from xlabind.ops import map_coordinates as ours
    from xlabind.ops import spline_filter

    grid, coords = map_coordinates_problem(64, 1 << 20, seed=3)
    coefficients = spline_filter(grid, 3, "mirror")
    host_coords = np.stack([np.asarray(c) for c in coords])
    scipy_values = _scipy_spline(host_coords, 3)
    expected = scipy_values(grid).value
    forward = jax.jit(lambda g, c: ours(g, c, 3, "mirror"))
    reference = jax.jit(_cubic_by_gathers)
    values = [
        Case(
            "spline_xlabind",
            "map_coordinates order 3, xlabind",
            lambda g: forward(g, coords),
            grid,
            expected,
        ),
        Case("spline_scipy", "map_coordinates order 3, SciPy", scipy_values, grid, expected),
        Case(
            "spline_jnp",
            "map_coordinates order 3, jnp gathers (coefficients given)",
            lambda g: reference(coefficients, coords),
            grid,
            expected,
        ),
    ]
    grad = jax.jit(jax.grad(lambda g, c: jnp.sum(ours(g, c, 3, "mirror") ** 2)))
    reference_grad = jax.jit(jax.grad(lambda k, c: jnp.sum(_cubic_by_gathers(k, c) ** 2)))
    gradients = [
        Case(
            "spline_grad_xlabind",
            "map_coordinates order 3 grad in input, xlabind",
            lambda g: grad(g, coords),
            grid,
        ),
        Case(
            "spline_grad_jnp",
            "map_coordinates order 3 grad in coefficients, jnp gathers",
            lambda g: reference_grad(coefficients, coords),
            grid,
        ),
    ]
    return [values, gradients]


# Grid sides for --grid-sweep: from well inside one core's L2 (1 MiB on the
# machines the targets were set for) to well past it; 64^3 float64 is 2 MiB.
SWEEP_SIDES = (32, 48, 56, 60, 64, 72, 96)


def map_coordinates_sweep(sides=SWEEP_SIDES, points: int = 1 << 20) -> list[list[Case]]:
    """The values comparison of map_coordinates_groups on side^3 grids, one
    group per side: how the ratio to jax moves as the grid outgrows a cache."""
    return [
        _map_coordinates_values(
            *map_coordinates_problem(side, points, seed=side), f"map_coordinates_{side}cubed"
        )
        for side in sides
    ]


def print_sweep(groups: list[list[Case]], results: dict[str, dict]) -> None:
    print(f"{'grid':>6}  {'MiB':>6}  {'xlabind ms':>10}  {'jax ms':>8}  {'jax / xlabind':>13}")
    for ours, theirs in groups:
        side = ours.x.shape[0]
        mine, jax_ms = (results[c.key]["median_us"] / 1e3 for c in (ours, theirs))
        print(
            f"{side:>4}^3  {ours.x.nbytes / 2**20:>6.2f}  {mine:>10.2f}  {jax_ms:>8.2f}  "
            f"{jax_ms / mine:>13.2f}"
        )


def spline_orders_groups(points: int = 1 << 20) -> list[list[Case]]:
    """For each spline order 2 to 5 (mirror, 2^`points` in a 64^3 float64
    grid, prefilter included): xlabind's values against SciPy's, and
    xlabind's gradient in the grid (nothing else differentiates these)."""
    from xlabind.ops import map_coordinates as ours

    grid, coords = map_coordinates_problem(64, points, seed=3)
    host_coords = np.stack([np.asarray(c) for c in coords])
    groups = []
    for order in (2, 3, 4, 5):
        scipy_values = _scipy_spline(host_coords, order)
        expected = scipy_values(grid).value
        values = jax.jit(lambda g, c, k=order: ours(g, c, k, "mirror"))
        grad = jax.jit(jax.grad(lambda g, c, k=order: jnp.sum(ours(g, c, k, "mirror") ** 2)))
        groups.append(
            [
                Case(
                    f"spline{order}_xlabind",
                    f"order {order}, xlabind",
                    lambda g, f=values: f(g, coords),
                    grid,
                    expected,
                ),
                Case(f"spline{order}_scipy", f"order {order}, SciPy", scipy_values, grid, expected),
                Case(
                    f"spline{order}_grad_xlabind",
                    f"order {order} grad, xlabind",
                    lambda g, f=grad: f(g, coords),
                    grid,
                ),
            ]
        )
    return groups


def print_spline_orders(groups: list[list[Case]], results: dict[str, dict]) -> None:
    print(
        f"{'order':>5}  {'xlabind ms':>10}  {'SciPy ms':>9}  {'SciPy / xlabind':>15}  "
        f"{'xlabind grad ms':>15}"
    )
    for ours, scipy_case, grad in groups:
        mine, theirs, slope = (results[c.key]["median_us"] / 1e3 for c in (ours, scipy_case, grad))
        order = ours.key[len("spline")]
        print(f"{order:>5}  {mine:>10.1f}  {theirs:>9.1f}  {theirs / mine:>15.2f}  {slope:>15.1f}")
