"""xlabind.nonlinear: first derivatives from plain jvp/vjp, higher ones from bound ones."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import xlabind

jax.config.update("jax_enable_x64", True)

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
TOL = {np.float32: 3e-2, np.complex64: 3e-2, np.float64: 1e-5, np.complex128: 1e-5}


def random(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape) * 0.5
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 0.5j * rng.normal(size=shape)
    return jnp.asarray(x.astype(dtype))


def like(x):
    return x


def sin_first_order(calls=None):
    """sin with plain NumPy jvp and vjp (first derivatives only)."""

    def log(name):
        if calls is not None:
            calls.append(name)

    return xlabind.nonlinear(
        lambda x: log("f") or np.sin(x),
        like,
        jvp=lambda x, t: log("jvp") or np.cos(x) * t,
        vjp=lambda x, ct: log("vjp") or np.cos(x) * ct,
        name="sin1",
    )


def sin_second_order():
    """sin whose jvp and vjp, x, t -> cos(x) t, are bound with derivatives of their own."""
    cos_times = xlabind.nonlinear(
        lambda x, t: np.cos(x) * t,
        like,
        jvp=lambda x, t, dx, dt: -np.sin(x) * t * dx + np.cos(x) * dt,
        vjp=lambda x, t, ct: (-np.sin(x) * t * ct, np.cos(x) * ct),
        name="cos_times",
    )
    return xlabind.nonlinear(np.sin, like, jvp=cos_times, vjp=cos_times, name="sin2")


@pytest.mark.parametrize("dtype", DTYPES)
def test_first_order_check_grads(dtype):
    op = sin_first_order()
    x = random((4,), dtype, 0)
    np.testing.assert_allclose(op(x), np.sin(np.asarray(x)), rtol=TOL[dtype])
    check_grads(op, (x,), order=1, modes=("fwd", "rev"), rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_second_order_check_grads_with_bound_derivatives(dtype):
    op = sin_second_order()
    x = random((4,), dtype, 1)
    check_grads(op, (x,), order=2, modes=("fwd", "rev"), rtol=TOL[dtype], atol=TOL[dtype])


def test_hessian_matches_pure_jax_in_every_mode_order():
    op = sin_second_order()
    f = lambda x: jnp.sum(op(x) ** 2 * x)
    ref = lambda x: jnp.sum(jnp.sin(x) ** 2 * x)
    x = random((5,), np.float64, 2)
    want = jax.hessian(ref)(x)
    for second in (
        jax.hessian,
        lambda g: jax.jacfwd(jax.jacfwd(g)),
        lambda g: jax.jacrev(jax.jacrev(g)),
        lambda g: jax.jacrev(jax.jacfwd(g)),
    ):
        np.testing.assert_allclose(second(f)(x), want, rtol=1e-10, atol=1e-12)


def test_jvp_and_vjp_are_each_called_once():
    calls = []
    op = sin_first_order(calls)
    x = jnp.ones(3)
    jax.jvp(op, (x,), (x,))
    assert calls == ["f", "jvp"]
    calls.clear()
    jax.grad(lambda x: op(x).sum())(x)
    assert calls == ["f", "vjp"]


def test_second_derivative_without_bound_derivatives_says_what_to_do():
    op = sin_first_order()
    with pytest.raises(TypeError, match=r"give its jvp and vjp as xlabind functions"):
        jax.hessian(lambda x: op(x).sum())(jnp.ones(2))


def test_several_inputs_outputs_and_a_nondiff_argument():
    # f(x1, n, x2) = (x1 * x2**2, n * x1), n not differentiable.
    def f(x1, n, x2):
        return x1 * x2**2, n * x1

    def jvp(x1, n, x2, dx1, dx2):
        return x2**2 * dx1 + 2 * x1 * x2 * dx2, n * dx1

    def vjp(x1, n, x2, ca, cb):
        return x2**2 * ca + n * cb, 2 * x1 * x2 * ca

    op = xlabind.nonlinear(f, lambda x1, n, x2: (x1, x1), jvp=jvp, vjp=vjp, nondiff_argnums=(1,))
    x1, n, x2 = jnp.array([1.0, 2.0]), jnp.array([3.0, 4.0]), jnp.array([0.5, -1.0])
    check_grads(lambda a, b: op(a, n, b), (x1, x2), order=1, modes=("fwd", "rev"))
    with pytest.raises(TypeError, match=r"argument 1 is in nondiff_argnums"):
        jax.grad(lambda n: op(x1, n, x2)[1].sum())(n)


def test_forward_only_when_vjp_is_none():
    op = xlabind.nonlinear(np.exp, like, jvp=lambda x, t: np.exp(x) * t, vjp=None, name="exp")
    np.testing.assert_allclose(jax.jacfwd(op)(jnp.zeros(2)), np.eye(2))
    with pytest.raises(TypeError, match=r"exp \(jvp\): no transpose is known.*vjp="):
        jax.grad(lambda x: op(x).sum())(jnp.zeros(2))


def test_vjp_may_be_left_out():
    """vjp defaults to None: a traceable JVP is transposed by JAX; a plain one
    gives forward mode, and jax.grad asks for vjp."""
    traced = xlabind.nonlinear(np.exp, like, jvp=xlabind.traceable(lambda x, t: jnp.exp(x) * t))
    np.testing.assert_allclose(jax.grad(lambda x: traced(x).sum())(jnp.zeros(2)), [1.0, 1.0])
    plain = xlabind.nonlinear(np.exp, like, jvp=lambda x, t: np.exp(x) * t, name="exp")
    np.testing.assert_allclose(jax.jacfwd(plain)(jnp.zeros(2)), np.eye(2))
    with pytest.raises(TypeError, match=r"exp \(jvp\): no transpose is known.*vjp="):
        jax.grad(lambda x: plain(x).sum())(jnp.zeros(2))


def test_in_place_jvp_and_vjp():
    def square(x, *, out):
        np.square(x, out=out)

    def square_jvp(x, t, *, out):
        np.multiply(2 * x, t, out=out)

    op = xlabind.nonlinear(square, like, jvp=square_jvp, vjp=square_jvp, in_place=True)
    x = jnp.array([1.0, -2.0, 3.0])
    np.testing.assert_allclose(jax.grad(lambda x: op(x).sum())(x), 2 * x)
    np.testing.assert_allclose(jax.jvp(op, (x,), (jnp.ones(3),))[1], 2 * x)


def test_static_kwargs_reach_every_derivative_callback():
    seen = []

    def f(x, *, power):
        seen.append(("f", power))
        return x**power

    def jvp(x, t, *, power):
        seen.append(("jvp", power))
        return power * x ** (power - 1) * t

    def vjp(x, ct, *, power):
        seen.append(("vjp", power))
        return power * x ** (power - 1) * ct

    op = xlabind.nonlinear(f, lambda x, **_: x, jvp=jvp, vjp=vjp)
    g = jax.grad(lambda x: op(x, power=3).sum())(jnp.full(2, 2.0))
    np.testing.assert_allclose(g, [12.0, 12.0])
    assert seen == [("f", 3), ("vjp", 3)]


def test_a_traceable_jvp_with_a_wrong_tangent_shape_is_refused_when_traced():
    # As jax.custom_jvp refuses it: in every transform that calls the rule.
    f = xlabind.nonlinear(np.sin, like, jvp=xlabind.traceable(lambda x, t: t[:2]), name="sin")
    message = (
        r"sin: the traceable jvp returned a tangent of shape \(2,\) for result 0, which "
        r"has shape \(3,\)"
    )
    x = jnp.ones(3)
    for transform in (
        lambda: jax.jvp(f, (x,), (x,)),
        lambda: jax.jit(lambda a, b: jax.jvp(f, (a,), (b,)))(x, x),
        lambda: jax.linearize(f, x),
        lambda: jax.grad(lambda a: f(a).sum())(x),
        lambda: jax.vmap(lambda a: jax.jvp(f, (a,), (a,)))(jnp.ones((2, 3))),
    ):
        with pytest.raises(TypeError, match=message):
            transform()
    complex_tangent = xlabind.nonlinear(
        np.sin, like, name="sin", jvp=xlabind.traceable(lambda x, t: t * 1j)
    )
    with pytest.raises(TypeError, match=r"sin: the traceable jvp returned a complex tangent"):
        jax.jvp(complex_tangent, (x,), (x,))
