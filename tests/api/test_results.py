"""What a function returns is cast only where no value can change; anything else
is an error naming the function, the result and both dtypes. Eager and jit
agree. (This file keeps jax_enable_x64 off, jax's default.)"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xlabind


def returning(value, dtype, shape=(), name="ret"):
    return xlabind.callback(
        lambda x: value, lambda x: jax.ShapeDtypeStruct(shape, dtype), name=name
    )


def both_ways(op):
    """The result eagerly and under jit (they must agree)."""
    eager = op(jnp.zeros(()))
    jitted = jax.jit(op)(jnp.zeros(()))
    assert eager.dtype == jitted.dtype
    np.testing.assert_array_equal(eager, jitted)
    return jitted


@pytest.mark.parametrize(
    "value, dtype, message",
    [
        (
            3.7,
            jnp.int32,
            r"result 0 is 3.7: a Python float cannot become int32 without losing its kind",
        ),
        (1e300, jnp.float32, r"result 0 is 1e\+300: 1e\+300 does not fit in float32"),
        (2**40, jnp.int32, r"result 0 is 1099511627776: .* does not fit in int32"),
        (-1, jnp.uint8, r"result 0 is -1: -1 does not fit in uint8"),
        (1j, jnp.float32, r"result 0 is 1j: a Python complex cannot become float32"),
        (1, jnp.bool_, r"result 0 is 1: a Python int cannot become bool"),
        (np.float32(2.5), jnp.int32, r"result 0 has dtype float32, expected dtype int32"),
        (
            np.arange(3, dtype=np.int64),
            jnp.float32,
            r"result 0 has dtype int64, expected dtype float32",
        ),
        (
            np.ones(3, np.float16),
            jnp.bfloat16,
            r"result 0 has dtype float16, expected dtype bfloat16",
        ),
        (np.float32(0.5), jnp.complex64, r"result 0 has dtype float32, expected dtype complex64"),
        ([1.0, 2.0], jnp.float32, r"result 0 is a list, not an array"),
        (
            None,
            jnp.float32,
            r"ret returned None for result 0; expected dtype float32 and shape \(\)"
            r".*needs in_place=True",
        ),
    ],
)
def test_lossy_or_ambiguous_results_are_errors(value, dtype, message):
    shape = np.shape(value) if isinstance(value, np.ndarray) else ()
    if isinstance(value, list):
        shape = (2,)
    op = returning(value, dtype, shape)
    for call in (op, jax.jit(op)):
        with pytest.raises(
            Exception,
            match=r"xlabind callback 'ret' raised TypeError: ret: " + message
            if value is not None
            else message,
        ):
            call(jnp.zeros(())).block_until_ready()


@pytest.mark.parametrize(
    "value, dtype, expected",
    [
        (3, jnp.int32, 3),
        (3, jnp.float32, 3.0),
        (0.1, jnp.float32, np.float32(0.1)),  # rounding is no change of kind
        (True, jnp.bool_, True),
        (2.5, jnp.complex64, 2.5),
        (float("inf"), jnp.float32, np.inf),
        (np.int16(7), jnp.int32, 7),
        (np.uint8(7), jnp.int16, 7),
        (np.float16(0.5), jnp.float32, 0.5),
        (np.complex64(0.5), jnp.complex64, 0.5),
    ],
)
def test_casts_that_keep_every_value_happen(value, dtype, expected):
    result = both_ways(returning(value, dtype))
    assert result.dtype == dtype
    np.testing.assert_array_equal(result, expected)


def test_declared_float64_is_float32_without_x64_eagerly_and_under_jit():
    op = xlabind.callback(
        lambda x: x.astype(np.float32), lambda x: jax.ShapeDtypeStruct(x.shape, np.float64)
    )
    result = both_ways(op)
    assert result.dtype == jnp.float32
    wrong = xlabind.callback(
        lambda x: np.zeros(x.shape, np.float64),
        lambda x: jax.ShapeDtypeStruct(x.shape, np.float64),
        name="f64",
    )
    with pytest.raises(
        Exception,
        match=r"f64: result 0 has dtype float64, expected dtype float32 "
        r".*while jax_enable_x64 is off",
    ):
        jax.jit(wrong)(jnp.zeros(())).block_until_ready()


def test_a_vjp_may_return_its_one_cotangent_as_a_one_tuple():
    # The jax.custom_vjp habit: (ct,) for a single argument.
    sin = xlabind.nonlinear(
        np.sin, lambda x: x, jvp=lambda x, t: np.cos(x) * t, vjp=lambda x, ct: (np.cos(x) * ct,)
    )
    x = jnp.linspace(0.0, 1.0, 3)
    np.testing.assert_allclose(jax.grad(lambda x: sin(x).sum())(x), np.cos(x), rtol=1e-6)
    linear = xlabind.linear(lambda x: 2 * x, lambda ct: [2 * ct], lambda x: x)
    np.testing.assert_allclose(jax.grad(lambda x: linear(x).sum())(x), [2.0] * 3)


def test_a_declared_single_result_returned_as_a_tuple_is_explained():
    op = xlabind.callback(lambda x: (x,), lambda x: x, name="tupled")
    with pytest.raises(Exception, match=r"tupled: result 0 is a tuple, not an array"):
        jax.jit(op)(jnp.ones(2)).block_until_ready()
