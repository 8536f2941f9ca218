"""The example's native ops (ops.py), bound with xlabind as differentiable
primitives: values, derivatives, vmap, errors, and the CUDA lowering."""

import jax
import jax.numpy as jnp
import jax.test_util
import numpy as np
import pytest
from ops import SIN, example_ops, scale, square, table, tables_built

import xlabind

# Between nodes h = 8 / 4096 apart, the table's slope is f' to within
# h |f''| / 2 ~ 1e-3.
SLOPE_TOLERANCE = 2e-3


def test_table_values_and_derivatives():
    x = jnp.linspace(-3.0, 3.0, 7)
    np.testing.assert_allclose(table(x, table=SIN), np.sin(np.asarray(x)), atol=1e-6)
    g = jax.grad(lambda x: jnp.sum(table(x, table=SIN)))(x)
    np.testing.assert_allclose(g, np.cos(np.asarray(x)), atol=SLOPE_TOLERANCE)
    np.testing.assert_allclose(
        jax.jacfwd(lambda x: table(x, table=SIN))(x),
        np.diag(np.cos(np.asarray(x))),
        atol=SLOPE_TOLERANCE,
    )
    xs = jnp.stack([x, x / 2])
    np.testing.assert_allclose(
        jax.vmap(lambda x: table(x, table=SIN))(xs), np.sin(np.asarray(xs)), atol=1e-6
    )
    # Outside the range the table is flat at its end values.
    np.testing.assert_allclose(
        table(jnp.array([-9.0, 9.0]), table=SIN), [np.sin(-4.0), np.sin(4.0)], atol=1e-6
    )
    np.testing.assert_allclose(
        jax.grad(lambda x: table(x, table=SIN).sum())(jnp.array([9.0])), [0.0]
    )
    nan = jnp.array([jnp.nan, 0.5])
    assert np.isnan(table(nan, table=SIN)[0]) and np.isfinite(table(nan, table=SIN)[1])
    assert np.isnan(jax.grad(lambda x: table(x, table=SIN).sum())(nan)[0])


# [table_once]
def test_a_table_is_built_once_per_executable_not_per_call():
    # Large enough for XLA's pool to share the work.
    x = jnp.linspace(-1.0, 1.0, 100_000)
    f = jax.jit(lambda x: table(x, table={**SIN, "function": "tanh"}))
    before = int(tables_built(x))
    for _ in range(5):
        np.testing.assert_allclose(f(x), np.tanh(np.asarray(x)), atol=1e-6)
    # One executable, one call site, five calls: one table.
    assert int(tables_built(x)) == before + 1
    grad = jax.jit(
        jax.grad(lambda x: jnp.sum(table(x, table={**SIN, "function": "exp"})))
    )
    grad(x).block_until_ready()
    compiled = int(tables_built(x))
    assert compiled >= before + 2  # the VJP's call site at least
    for _ in range(3):
        np.testing.assert_allclose(grad(x), np.exp(np.asarray(x)), rtol=SLOPE_TOLERANCE)
    assert int(tables_built(x)) == compiled


# [table_once]


# [table_errors]
def test_a_bad_table_is_an_error_naming_the_op():
    with pytest.raises(
        Exception,
        match=r"example_table: unknown table function 'cos'; "
        r"use sin, tanh or exp",
    ):
        jax.jit(lambda x: table(x, table={**SIN, "function": "cos"}))(jnp.ones(2))
    with pytest.raises(
        Exception, match=r"example_table: the attribute has no field 'range'"
    ):
        jax.jit(lambda x: table(x, table={"function": "sin", "size": 3}))(jnp.ones(2))


# [table_errors]


# [scale_tests]
def test_values():
    x = jnp.arange(5.0)
    np.testing.assert_allclose(scale(x, factor=3.0), 3.0 * np.arange(5.0))
    np.testing.assert_allclose(
        jax.jit(lambda x: scale(x, factor=-2.0))(x), -2.0 * np.arange(5.0)
    )


def test_grad():
    x = jnp.linspace(0.0, 1.0, 4)
    g = jax.grad(lambda x: jnp.sum(jnp.sin(scale(x, factor=2.0))))(x)
    np.testing.assert_allclose(g, 2.0 * np.cos(2.0 * np.asarray(x)), rtol=1e-6)
    np.testing.assert_allclose(
        jax.hessian(lambda x: jnp.sum(scale(x, factor=2.0) ** 2))(x),
        8.0 * np.eye(4),
        rtol=1e-6,
    )


def test_vmap_is_one_call():
    xs = jnp.arange(6.0).reshape(2, 3)
    f = jax.vmap(lambda x: scale(x, factor=0.5))
    np.testing.assert_allclose(f(xs), 0.5 * np.arange(6.0).reshape(2, 3))
    assert jax.jit(f).lower(xs).as_text().count("@example_scale(") == 1


# [scale_tests]


# [square_tests]
def test_square_derivatives_in_every_mode():
    x = jnp.array([0.5, -1.0, 2.0, 3.0])
    np.testing.assert_allclose(square(x), np.asarray(x) ** 2)
    expected = np.diag(2.0 * np.asarray(x))
    for jacobian in (jax.jacfwd, jax.jacrev):  # a batch of tangents or of cotangents
        np.testing.assert_allclose(jacobian(square)(x), expected)
    xs = jnp.stack([x, 2.0 * x])
    np.testing.assert_allclose(
        jax.vmap(jax.jacfwd(square))(xs), [expected, 2.0 * expected]
    )


# [square_tests]


# [errors]
def test_handler_errors_name_the_op_and_the_dtype():
    with pytest.raises(
        Exception,
        match=r"example_square: supports float32 and "
        r"float64, got int32",
    ):
        square(jnp.arange(3, dtype=jnp.int32)).block_until_ready()


# [errors]


# [table_cuda]
@pytest.mark.skipif(
    "CUDA" not in example_ops.registrations(),
    reason="example_ops was built without CUDA (CMake found no nvcc, or Bazel built it "
    "for a machine the pinned CUDA is not for, such as Linux aarch64)",
)
def test_table_lowers_for_cuda_with_its_nested_attribute():
    text = (
        jax.jit(lambda x: table(x, table=SIN))
        .trace(jnp.ones(3, jnp.float32))
        .lower(lowering_platforms=("cuda",))
        .as_text()
    )
    assert "@example_table(" in text and 'function = "sin"' in text
    assert (
        xlabind._runtime.extension.handler_metadata(
            example_ops.registrations()["CUDA"]["example_table_jvp"]["execute"]
        )["traits"]
        == 1
    )


# [table_cuda]


# [scale_cuda]
def test_lowers_for_cuda():
    text = (
        jax.jit(lambda x: scale(x, factor=2.0))
        .trace(jnp.ones(3))
        .lower(lowering_platforms=("cuda",))
        .as_text()
    )
    assert "@example_scale(" in text and "factor = 2.000000e+00" in text


# [scale_cuda]


def test_derivatives_match_finite_differences():
    # JVPs and VJPs against central differences (float32): scale, linear, to
    # any order; square and table, whose JVP targets are linear in the
    # tangent only, to the first.
    x = jnp.array([0.3, -0.7, 1.1], jnp.float32)
    for f, order in (
        (lambda x: scale(x, factor=1.5), 2),
        (square, 1),
        (lambda x: table(x, table={**SIN, "function": "tanh"}), 1),
    ):
        jax.test_util.check_grads(
            f, (x,), order=order, modes=("fwd", "rev"), atol=2e-2, rtol=2e-2, eps=1e-2
        )


if __name__ == "__main__":
    raise SystemExit(pytest.main(["-q", "-p", "no:cacheprovider", __file__]))
