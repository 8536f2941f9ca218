"""The bound ducc0 and SciPy examples agree with calling the libraries directly,
and their derivatives pass finite-difference checks."""

import ducc0
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
from jax.test_util import check_grads
from python_ops.ducc0_fft import c2c, genuine_fht
from python_ops.ducc0_sht import nalm, synthesis
from python_ops.scipy_gammaln import gammaln

jax.config.update("jax_enable_x64", True)
rng = np.random.default_rng(0)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_c2c_matches_ducc0_and_gradients(dtype):
    x = (rng.normal(size=(4, 6)) + 1j * rng.normal(size=(4, 6))).astype(dtype)
    tol = 1e-4 if dtype == np.complex64 else 1e-10
    np.testing.assert_allclose(c2c(x), ducc0.fft.c2c(x), rtol=tol, atol=tol)
    np.testing.assert_allclose(
        jax.jit(lambda x: c2c(x, axes=(1,), forward=False))(x),
        ducc0.fft.c2c(x, axes=(1,), forward=False),
        rtol=tol,
        atol=tol,
    )
    if dtype == np.complex128:
        check_grads(lambda x: c2c(x, axes=(0,)), (x,), order=2, modes=("fwd", "rev"))


def test_c2c_native_vmap():
    x = rng.normal(size=(3, 5, 4)) + 1j * rng.normal(size=(3, 5, 4))
    np.testing.assert_allclose(jax.vmap(c2c)(x), ducc0.fft.c2c(x, axes=(1, 2)), atol=1e-10)
    np.testing.assert_allclose(
        jax.vmap(c2c, in_axes=2, out_axes=2)(x), ducc0.fft.c2c(x, axes=(0, 1)), atol=1e-10
    )
    check_grads(jax.vmap(lambda x: c2c(x, axes=(0,))), (x,), order=2, modes=("fwd", "rev"))


def test_genuine_fht():
    x = rng.normal(size=(3, 8))
    np.testing.assert_allclose(genuine_fht(x), ducc0.fft.genuine_fht(x), atol=1e-10)
    check_grads(genuine_fht, (x,), order=2, modes=("fwd", "rev"))


def test_wrong_dtype_is_refused_before_any_call():
    with pytest.raises(TypeError, match=r"c2c: x must be complex64 or complex128, got float64"):
        c2c(np.ones(3))


@pytest.mark.parametrize("lmax", [4, 9])
def test_sht_synthesis_matches_ducc0_and_gradients(lmax):
    kwargs = dict(lmax=lmax, ntheta=lmax + 1, nphi=2 * lmax + 1)
    alm = rng.normal(size=(1, nalm(lmax))) + 1j * rng.normal(size=(1, nalm(lmax)))
    alm[0, : lmax + 1] = alm[0, : lmax + 1].real  # m = 0 coefficients of a real map are real
    direct = ducc0.sht.synthesis_2d(
        alm=alm, spin=0, lmax=lmax, geometry="GL", **{k: kwargs[k] for k in ("ntheta", "nphi")}
    )
    np.testing.assert_allclose(synthesis(alm, **kwargs), direct, atol=1e-10)
    check_grads(lambda a: synthesis(a, **kwargs), (alm,), order=2, modes=("fwd", "rev"))
    # The transpose is exactly what ducc0's adjoint gives, up to the documented factors.
    map_ct = rng.normal(size=(1, lmax + 1, 2 * lmax + 1))
    (transposed,) = jax.linear_transpose(lambda a: synthesis(a, **kwargs), alm)(map_ct)
    adjoint = ducc0.sht.adjoint_synthesis_2d(map=map_ct, spin=0, lmax=lmax, geometry="GL")
    adjoint[:, lmax + 1 :] *= 2
    np.testing.assert_allclose(transposed, np.conj(adjoint), atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gammaln_matches_scipy_and_second_derivatives(dtype):
    x = jnp.linspace(0.5, 5.0, 7, dtype=dtype)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(gammaln(x), scipy.special.gammaln(np.asarray(x)), rtol=tol)
    np.testing.assert_allclose(
        jax.grad(lambda x: gammaln(x).sum())(x), scipy.special.digamma(np.asarray(x)), rtol=tol
    )
    np.testing.assert_allclose(
        jnp.diag(jax.hessian(lambda x: gammaln(x).sum())(x)),
        scipy.special.polygamma(1, np.asarray(x)),
        rtol=tol,
    )
    if dtype == np.float64:
        check_grads(gammaln, (x,), order=2, modes=("fwd", "rev"))


def test_gammaln_third_derivative_names_the_missing_level():
    with pytest.raises(TypeError, match=r"digamma_times \(jvp\): cannot differentiate"):
        jax.jacfwd(jax.hessian(lambda x: gammaln(x).sum()))(jnp.ones(2))
