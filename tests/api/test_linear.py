"""xlabind.linear: derivatives of every order, linear_transpose, nondiff args, zeros."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import xlabind

jax.config.update("jax_enable_x64", True)

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
TOL = {np.float32: 2e-2, np.complex64: 2e-2, np.float64: 1e-5, np.complex128: 1e-5}


def random(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.normal(size=shape)
    return x.astype(dtype)


def matvec_op(A, calls=None):
    """x -> A @ x with transpose ct -> A.T @ ct (no conjugation)."""

    def f(x):
        if calls is not None:
            calls.append("f")
        return (A @ x).astype(x.dtype)

    def f_T(ct):
        if calls is not None:
            calls.append("T")
        return (A.T @ ct).astype(ct.dtype)

    return xlabind.linear(f, f_T, lambda x: jax.ShapeDtypeStruct((A.shape[0],), x.dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_check_grads_orders_1_and_2(dtype):
    A = random((3, 4), dtype, seed=1)
    op = matvec_op(A)
    x = random((4,), dtype)
    np.testing.assert_allclose(op(x), A @ x, rtol=TOL[dtype])
    check_grads(op, (x,), order=2, modes=("fwd", "rev"), rtol=TOL[dtype], atol=TOL[dtype])
    # Through a nonlinear JAX function around it, so second derivatives are nonzero.
    check_grads(
        lambda x: jnp.sin(op(x)) * op(x),
        (x,),
        order=2,
        modes=("fwd", "rev"),
        rtol=TOL[dtype],
        atol=TOL[dtype],
    )


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_transpose_is_the_linear_transpose_not_the_adjoint(dtype):
    A = random((3, 4), dtype, seed=2)
    op = matvec_op(A)
    ct = random((3,), dtype, seed=3)
    (transposed,) = jax.linear_transpose(op, random((4,), dtype))(ct)
    np.testing.assert_allclose(transposed, A.T @ ct, rtol=1e-5)
    assert not np.allclose(transposed, A.conj().T @ ct, rtol=1e-3)


def test_linear_transpose_twice_is_the_function():
    A = random((3, 4), np.float64)
    op = matvec_op(A)
    transposed = jax.linear_transpose(op, jnp.zeros(4))
    again = jax.linear_transpose(lambda ct: transposed(ct)[0], jnp.zeros(3))
    x = random((4,), np.float64, seed=5)
    np.testing.assert_allclose(again(x)[0], A @ x)


def test_third_and_fourth_derivatives():
    A = random((4, 4), np.float64)
    op = matvec_op(A)
    f = lambda x: jnp.sum(op(x) ** 4)
    x = random((4,), np.float64, seed=7)
    ref = lambda x: jnp.sum((jnp.asarray(A) @ x) ** 4)
    np.testing.assert_allclose(
        jax.jacfwd(jax.jacrev(jax.hessian(f)))(x),
        jax.jacfwd(jax.jacrev(jax.hessian(ref)))(x),
        rtol=1e-9,
    )


def test_nondiff_argument_in_any_position():
    # f(x, scale, y) = scale * (x + 2 y): linear in x and y jointly; scale is a parameter.
    def f(x, scale, y):
        return scale * (x + 2 * y)

    def f_T(scale, ct):
        return scale * ct, 2 * scale * ct

    op = xlabind.linear(f, f_T, lambda x, s, y: x, nondiff_argnums=(1,))
    x, y, s = jnp.arange(3.0), jnp.ones(3), jnp.full(3, 0.5)
    check_grads(lambda x, y: op(x, s, y), (x, y), order=2, modes=("fwd", "rev"))
    gx, gy = jax.grad(lambda x, y: op(x, s, y).sum(), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, s)
    np.testing.assert_allclose(gy, 2 * s)
    with pytest.raises(
        TypeError, match=r"argument 1 is in nondiff_argnums.*cannot be differentiated"
    ):
        jax.grad(lambda s: op(x, s, y).sum())(s)


def test_symbolic_zero_tangents_call_nothing():
    calls = []
    op = xlabind.linear(
        lambda x, y: calls.append("f") or x + y,
        lambda ct: (calls.append("T") or ct, ct),
        lambda x, y: x,
    )
    x = jnp.ones(3)
    # The tangent of y is a symbolic zero: one call for the primal, one for the JVP.
    jax.jvp(lambda x: op(x, jnp.zeros(3)), (x,), (x,))
    assert calls == ["f", "f"]
    calls.clear()
    # Reverse mode: one forward call, one transpose call.
    jax.grad(lambda x: op(x, x).sum())(x)
    assert calls == ["f", "T"]


def test_zero_cotangent_of_an_unused_result_is_filled_in():
    seen = []
    op = xlabind.linear(
        lambda x: (x, 2 * x),
        lambda a, b: seen.append((np.array(a), np.array(b))) or a + 2 * b,
        lambda x: (x, x),
    )
    g = jax.grad(lambda x: jnp.sum(3 * op(x)[0]))(jnp.ones(2))
    np.testing.assert_allclose(g, [3.0, 3.0])
    ((a, b),) = seen  # one transpose call; the unused result's cotangent arrives as zeros
    np.testing.assert_allclose(a, [3.0, 3.0])
    np.testing.assert_allclose(b, [0.0, 0.0])


def test_missing_transpose_is_a_clear_error():
    op = xlabind.linear(lambda x: 2 * x, None, lambda x: x, name="double")
    np.testing.assert_allclose(jax.jvp(op, (jnp.ones(2),), (jnp.ones(2),))[1], [2.0, 2.0])
    with pytest.raises(TypeError, match=r"double: no transpose is known.*transpose="):
        jax.grad(lambda x: op(x).sum())(jnp.ones(2))


def test_plain_callback_is_not_differentiable():
    op = xlabind.callback(lambda x: x, lambda x: x, name="plain")
    with pytest.raises(TypeError, match=r"plain has no derivative rules.*xlabind.linear"):
        jax.grad(lambda x: op(x).sum())(jnp.ones(2))


def test_jit_of_grad_and_grad_of_jit_agree():
    A = random((3, 3), np.float64)
    op = matvec_op(A)
    f = lambda x: jnp.sum(jnp.tanh(op(x)))
    x = random((3,), np.float64, seed=9)
    np.testing.assert_allclose(jax.jit(jax.grad(f))(x), jax.grad(jax.jit(f))(x))
    np.testing.assert_allclose(jax.grad(f)(x), jax.grad(lambda x: jnp.sum(jnp.tanh(A @ x)))(x))
