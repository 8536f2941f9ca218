"""Checks of the Linux aarch64 wheel, run under qemu
(tests/packaging/test_wheel_emulated.py runs this file with the aarch64
sysroot's CPython) for every wheel it runs: each constructor under jit, grad
and vmap, an exception and the call after it, in a few small programs (the
constructors' whole test files take minutes there), and
xlabind.ops.map_coordinates at every order against SciPy, with its
gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.ndimage
from jax.test_util import check_grads

import xlabind
from xlabind.ops import map_coordinates

jax.config.update("jax_enable_x64", True)

A = np.arange(6.0).reshape(2, 3) - 2.0
X = jnp.array([0.5, -1.0, 2.0])
XS = jnp.stack([X, 2 * X])


def test_callback_under_jit_and_vmap():
    cube = xlabind.callback(lambda x: x**3, lambda x: x)
    np.testing.assert_allclose(jax.jit(cube)(X), X**3)
    np.testing.assert_allclose(jax.vmap(cube)(XS), XS**3)


def test_linear_under_jit_grad_and_vmap():
    matvec = xlabind.linear(
        lambda x: A @ x, lambda ct: A.T @ ct, lambda x: jax.ShapeDtypeStruct((2,), x.dtype)
    )
    np.testing.assert_allclose(jax.jit(matvec)(X), A @ X)
    grad = jax.grad(lambda x: jnp.sum(matvec(x) ** 2))(X)
    np.testing.assert_allclose(grad, 2 * A.T @ A @ X)
    np.testing.assert_allclose(jax.vmap(matvec)(XS), XS @ A.T)


def test_multilinear_under_jit_grad_and_vmap():
    mul = xlabind.multilinear(
        lambda x, y: x * y, (lambda y, ct: y * ct, lambda x, ct: x * ct), lambda x, y: x
    )
    y = X + 1.0
    np.testing.assert_allclose(jax.jit(mul)(X, y), X * y)
    gx, gy = jax.grad(lambda x, y: jnp.sum(mul(x, y) ** 2), argnums=(0, 1))(X, y)
    np.testing.assert_allclose(gx, 2 * X * y**2)
    np.testing.assert_allclose(gy, 2 * X**2 * y)
    np.testing.assert_allclose(jax.vmap(mul)(XS, XS), XS * XS)


def test_nonlinear_under_jit_grad_and_vmap():
    sin = xlabind.nonlinear(
        np.sin, lambda x: x, jvp=lambda x, t: np.cos(x) * t, vjp=lambda x, ct: np.cos(x) * ct
    )
    np.testing.assert_allclose(jax.jit(sin)(X), np.sin(X))
    np.testing.assert_allclose(jax.grad(lambda x: jnp.sum(sin(x)))(X), np.cos(X))
    np.testing.assert_allclose(jax.jacfwd(sin)(X), np.diag(np.cos(X)))
    np.testing.assert_allclose(jax.vmap(sin)(XS), np.sin(XS))


def test_an_exception_reaches_the_caller_and_the_next_call_runs():
    def fails_on_negative(x):
        if (x < 0).any():
            raise ValueError("negative input")
        return x + 1

    op = jax.jit(xlabind.callback(fails_on_negative, lambda x: x))
    with pytest.raises(Exception, match="negative input"):
        op(X).block_until_ready()
    np.testing.assert_allclose(op(jnp.abs(X)), jnp.abs(X) + 1)


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
