"""The consumer's own native ops, bound with xlabind as differentiable
primitives: values, derivatives, vmap, errors, and the CUDA lowering."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import consumer_ops
import xlabind

xlabind.register_ffi_targets(consumer_ops.registrations())

SCALE = xlabind.ffi_target("consumer_scale", platforms=("cpu", "cuda"))
# Linear in x, and its own transpose: y = factor * x.
scale = xlabind.linear(SCALE, SCALE, lambda x, **_: x, vmap_method="expand_dims",
                       name="consumer_scale")

# Nonlinear: y = x * x. Its JVP, 2 x t, is linear in t and its own transpose,
# so the same target is the VJP.
SQUARE_JVP = xlabind.ffi_target("consumer_square_jvp")
square = xlabind.nonlinear(xlabind.ffi_target("consumer_square"), lambda x: x,
                           jvp=SQUARE_JVP, vjp=SQUARE_JVP, vmap_method="expand_dims",
                           name="consumer_square")


def test_values():
    x = jnp.arange(5.0)
    np.testing.assert_allclose(scale(x, factor=3.0), 3.0 * np.arange(5.0))
    np.testing.assert_allclose(jax.jit(lambda x: scale(x, factor=-2.0))(x), -2.0 * np.arange(5.0))


def test_grad():
    x = jnp.linspace(0.0, 1.0, 4)
    g = jax.grad(lambda x: jnp.sum(jnp.sin(scale(x, factor=2.0))))(x)
    np.testing.assert_allclose(g, 2.0 * np.cos(2.0 * np.asarray(x)), rtol=1e-6)
    np.testing.assert_allclose(jax.hessian(lambda x: jnp.sum(scale(x, factor=2.0) ** 2))(x),
                               8.0 * np.eye(4), rtol=1e-6)


def test_vmap_is_one_call():
    xs = jnp.arange(6.0).reshape(2, 3)
    f = jax.vmap(lambda x: scale(x, factor=0.5))
    np.testing.assert_allclose(f(xs), 0.5 * np.arange(6.0).reshape(2, 3))
    assert jax.jit(f).lower(xs).as_text().count("@consumer_scale(") == 1


def test_square_derivatives_in_every_mode():
    x = jnp.array([0.5, -1.0, 2.0, 3.0])
    np.testing.assert_allclose(square(x), np.asarray(x) ** 2)
    expected = np.diag(2.0 * np.asarray(x))
    for jacobian in (jax.jacfwd, jax.jacrev):  # a batch of tangents or of cotangents
        np.testing.assert_allclose(jacobian(square)(x), expected)
    xs = jnp.stack([x, 2.0 * x])
    np.testing.assert_allclose(jax.vmap(jax.jacfwd(square))(xs),
                               [expected, 2.0 * expected])


def test_handler_errors_name_the_op_and_the_dtype():
    with pytest.raises(Exception, match=r"consumer_square: supports float32 and float64, got int32"):
        square(jnp.arange(3, dtype=jnp.int32)).block_until_ready()


def test_lowers_for_cuda():
    text = jax.jit(lambda x: scale(x, factor=2.0)).trace(jnp.ones(3)).lower(
        lowering_platforms=("cuda",)).as_text()
    assert "@consumer_scale(" in text and "factor = 2.000000e+00" in text


if __name__ == "__main__":
    raise SystemExit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
