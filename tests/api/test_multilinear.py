"""xlabind.multilinear: product rule, transposes of every order, three factors."""

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
    x = rng.normal(size=shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.normal(size=shape)
    return jnp.asarray(x.astype(dtype))


def product3(calls=None):
    """x * y * z, elementwise, with the three transposes."""

    def log(name):
        if calls is not None:
            calls.append(name)

    def f(x, y, z):
        log("f")
        return x * y * z

    return xlabind.multilinear(
        f,
        (
            lambda y, z, ct: log("T0") or y * z * ct,
            lambda x, z, ct: log("T1") or x * z * ct,
            lambda x, y, ct: log("T2") or x * y * ct,
        ),
        lambda x, y, z: x,
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_check_grads_order_2_forward_and_reverse(dtype):
    op = product3()
    args = tuple(random((5,), dtype, seed) for seed in range(3))
    np.testing.assert_allclose(op(*args), args[0] * args[1] * args[2], rtol=TOL[dtype])
    check_grads(op, args, order=2, modes=("fwd", "rev"), rtol=TOL[dtype], atol=TOL[dtype])


def test_hessian_matches_pure_jax():
    op = product3()
    f = lambda x, y, z: jnp.sum(jnp.sin(op(x, y, z)))
    ref = lambda x, y, z: jnp.sum(jnp.sin(x * y * z))
    args = tuple(random((3,), np.float64, seed) for seed in range(3))
    for got, want in zip(
        jax.tree_util.tree_leaves(jax.hessian(f, argnums=(0, 1, 2))(*args)),
        jax.tree_util.tree_leaves(jax.hessian(ref, argnums=(0, 1, 2))(*args)),
    ):
        np.testing.assert_allclose(got, want, rtol=1e-10)
    for got, want in zip(
        jax.tree_util.tree_leaves(jax.jacrev(jax.jacrev(f, (0, 1)), (0, 2))(*args)),
        jax.tree_util.tree_leaves(jax.jacrev(jax.jacrev(ref, (0, 1)), (0, 2))(*args)),
    ):
        np.testing.assert_allclose(got, want, rtol=1e-10)


def test_jvp_is_the_product_rule_with_one_call_per_nonzero_tangent():
    calls = []
    op = product3(calls)
    x, y, z = (jnp.full(2, v) for v in (1.0, 2.0, 3.0))
    _, t = jax.jvp(lambda x: op(x, y, z), (x,), (jnp.ones(2),))
    np.testing.assert_allclose(t, y * z)
    assert calls == ["f", "f"]  # the primal and one term: y's and z's tangents are zero
    calls.clear()
    jax.grad(lambda x, z: op(x, y, z).sum(), argnums=(0, 1))(x, z)
    assert sorted(calls) == ["T0", "T2", "f"]


def test_nondiff_argument_and_missing_transpose():
    # f(w, x, y) = w * x * y with w fixed; no transpose given for y.
    op = xlabind.multilinear(
        lambda w, x, y: w * x * y,
        (None, lambda w, y, ct: w * y * ct, None),
        lambda w, x, y: x,
        nondiff_argnums=(0,),
        name="wxy",
    )
    w, x, y = jnp.full(2, 2.0), jnp.ones(2), jnp.full(2, 3.0)
    np.testing.assert_allclose(jax.grad(lambda x: op(w, x, y).sum())(x), w * y)
    np.testing.assert_allclose(jax.jvp(lambda y: op(w, x, y), (y,), (jnp.ones(2),))[1], w * x)
    with pytest.raises(TypeError, match=r"wxy: no transpose is known for arguments \[2\]"):
        jax.grad(lambda y: op(w, x, y).sum())(y)
    with pytest.raises(TypeError, match=r"argument 0 is in nondiff_argnums"):
        jax.grad(lambda w: op(w, x, y).sum())(w)


def test_transposing_two_factors_at_once_is_refused():
    op = product3()
    x = jnp.ones(2)
    with pytest.raises(
        TypeError, match=r"cannot be transposed with respect to arguments \[0, 1, 2\]"
    ):
        jax.linear_transpose(lambda x: op(x, x, x), x)(x)


def test_wrong_number_of_transposes():
    op = xlabind.multilinear(
        lambda x, y: x * y, (lambda y, ct: y * ct,), lambda x, y: x, name="short"
    )
    with pytest.raises(TypeError, match=r"short: transposes must have one entry per argument"):
        jax.grad(lambda x: op(x, x).sum())(jnp.ones(2))
