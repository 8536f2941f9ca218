"""Checks of the Linux aarch64 wheel that its test files do not make, run
under qemu beside them (tests/packaging/test_wheel_emulated.py runs this
file with the aarch64 sysroot's CPython): xlabind.ops.map_coordinates at
every order against SciPy, with its gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.ndimage
from jax.test_util import check_grads

from xlabind.ops import map_coordinates

jax.config.update("jax_enable_x64", True)


@pytest.mark.parametrize("order", range(6))
def test_map_coordinates_matches_scipy_with_gradients(order):
    rng = np.random.default_rng(order)
    # Axes of 20 and more: SciPy's own prefilter is approximate on short ones.
    grid = rng.standard_normal((24, 21))
    points = [rng.uniform(0.5, 22.5, 30), rng.uniform(0.5, 19.5, 30)]
    got = map_coordinates(jnp.asarray(grid), [jnp.asarray(p) for p in points], order, mode="mirror")
    want = scipy.ndimage.map_coordinates(grid, points, order=order, mode="mirror")
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    check_grads(
        lambda g: map_coordinates(g, points, order, mode="mirror"),
        (jnp.asarray(grid),),
        order=1,
        modes=("rev",),
    )
    if order >= 2:  # differentiable in the coordinates (order k: C^(k-1))
        check_grads(
            lambda p: map_coordinates(jnp.asarray(grid), [p, points[1]], order, mode="mirror"),
            (jnp.asarray(points[0]),),
            order=1,
            modes=("rev",),
        )
