"""jacfwd, jacrev, hessian and vmap over the tangents of jvp, for every kind of
bound function under every vmap method."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from layouts import elementwise, elementwise_shape, single_result_shape

import xlabind

jax.config.update("jax_enable_x64", True)

METHODS = ["sequential", "expand_dims", "broadcast_all", "native"]


def native_or_plain(method, fn):
    """`fn` (a NumPy ufunc-like) as the function a method calls, with its shape function."""
    if method == "native":
        return elementwise(fn), elementwise_shape
    return fn, lambda *args, **_: jax.ShapeDtypeStruct(
        np.broadcast_shapes(*(a.shape for a in args)), args[0].dtype
    )


def linear_op(method):
    f, shape = native_or_plain(method, lambda x: 3.0 * x)
    t, t_shape = native_or_plain(method, lambda ct: 3.0 * ct)
    op = xlabind.linear(f, t, shape, transpose_shape_dtypes=t_shape, vmap_method=method)
    return (lambda x: jnp.sin(op(x))), (lambda x: jnp.sin(3.0 * x))


def multilinear_op(method):
    f, shape = native_or_plain(method, np.multiply)
    t, _ = native_or_plain(method, np.multiply)
    t_shapes = [single_result_shape(0), single_result_shape(0)] if method == "native" else ()
    op = xlabind.multilinear(f, (t, t), shape, transpose_shape_dtypes=t_shapes, vmap_method=method)
    return (lambda x: jnp.sin(op(x, x * x))), (lambda x: jnp.sin(x * x * x))


def nonlinear_op(method):
    # sin, with jvp and vjp that are xlabind functions themselves (cos(x) * t, whose
    # own derivatives are given too), so every order works.
    cos_t, two_arg_shape = native_or_plain(method, lambda x, t: np.cos(x) * t)
    d_cos_t, _ = native_or_plain(method, lambda x, t, dx, dt: -np.sin(x) * t * dx + np.cos(x) * dt)
    if method == "native":
        vjp_of_cos_t = elementwise(lambda x, t, ct: np.stack([-np.sin(x) * t * ct, np.cos(x) * ct]))

        def vjp_shape(x, t, ct, *, batch_axes=None):
            one = single_result_shape(0)(x, t, ct, batch_axes=batch_axes)
            return (one, one)

        def vjp_fn(x, t, ct, *, batch_axes=None):
            both = vjp_of_cos_t(x, t, ct, batch_axes=batch_axes)
            return both[0], both[1]
    else:
        vjp_shape = None

        def vjp_fn(x, t, ct):
            return -np.sin(x) * t * ct, np.cos(x) * ct

    cos_times = xlabind.nonlinear(
        cos_t,
        two_arg_shape,
        jvp=d_cos_t,
        vjp=vjp_fn,
        vjp_shape_dtypes=vjp_shape,
        vmap_method=method,
    )
    sin, shape = native_or_plain(method, np.sin)
    op = xlabind.nonlinear(
        sin,
        shape,
        jvp=cos_times,
        vjp=cos_times,
        vjp_shape_dtypes=single_result_shape(0) if method == "native" else None,
        vmap_method=method,
    )
    return (lambda x: op(x) * x), (lambda x: jnp.sin(x) * x)


KINDS = {"linear": linear_op, "multilinear": multilinear_op, "nonlinear": nonlinear_op}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", KINDS)
def test_jacobians_and_hessian_match_pure_jax(kind, method):
    f, reference = KINDS[kind](method)
    x = jnp.linspace(0.1, 1.3, 4)
    for transform in (jax.jacfwd, jax.jacrev):
        np.testing.assert_allclose(
            transform(f)(x), transform(reference)(x), rtol=1e-12, err_msg=transform.__name__
        )
    scalar = lambda g: lambda x: jnp.sum(g(x) ** 2)
    np.testing.assert_allclose(
        jax.hessian(scalar(f))(x), jax.hessian(scalar(reference))(x), rtol=1e-10, atol=1e-12
    )
    np.testing.assert_allclose(jax.jit(jax.jacfwd(f))(x), jax.jacfwd(reference)(x), rtol=1e-12)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kind", KINDS)
def test_vmap_over_the_tangents_of_jvp(kind, method):
    f, reference = KINDS[kind](method)
    x = jnp.linspace(0.1, 1.3, 4)
    tangents = jnp.arange(12.0).reshape(3, 4) / 7
    got = jax.vmap(lambda t: jax.jvp(f, (x,), (t,))[1])(tangents)
    want = jax.vmap(lambda t: jax.jvp(reference, (x,), (t,))[1])(tangents)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # Tangents batched along another axis, primals batched too.
    xs = jnp.stack([x, 2 * x])
    got = jax.vmap(lambda x, t: jax.jvp(f, (x,), (t,))[1], in_axes=(0, 1))(xs, tangents[:2].T)
    want = jax.vmap(lambda x, t: jax.jvp(reference, (x,), (t,))[1], in_axes=(0, 1))(
        xs, tangents[:2].T
    )
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_jacobians_of_vmapped_functions(kind):
    f, reference = KINDS[kind]("native")
    xs = jnp.linspace(0.1, 1.3, 6).reshape(2, 3)
    for transform in (jax.jacfwd, jax.jacrev):
        np.testing.assert_allclose(
            transform(jax.vmap(f))(xs),
            transform(jax.vmap(reference))(xs),
            rtol=1e-12,
            err_msg=transform.__name__,
        )
