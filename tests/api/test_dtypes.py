"""Every dtype the handler supports crosses it intact, in both directions."""

import cases
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import xlabind

jax.config.update("jax_enable_x64", True)

# The dtypes the issue requires, plus every float8 / sub-byte type ml_dtypes has.
REQUIRED = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
]
EXTRA = [
    name
    for name in (
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3",
        "float8_e3m4",
        "float8_e4m3b11fnuz",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
        "float8_e8m0fnu",
        "float4_e2m1fn",
        "int4",
        "uint4",
        "int2",
        "uint2",
    )
    if hasattr(ml_dtypes, name)
]
ALL = REQUIRED + EXTRA


def as_dtype(name):
    return np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)


def sample(name, shape):
    """Distinct, exactly representable values of dtype `name`."""
    dtype = as_dtype(name)
    n = int(np.prod(shape))
    if dtype == np.bool_:
        values = np.arange(n) % 3 == 1
    elif name == "float8_e8m0fnu":  # powers of two only
        values = 2.0 ** (np.arange(n) % 5)
    elif dtype.kind == "c":
        values = (np.arange(n) % 7 - 3) + 1j * (np.arange(n) % 5)
    else:
        info = (
            ml_dtypes.iinfo(dtype)
            if dtype.kind in "iu" or name in ("int4", "uint4", "int2", "uint2")
            else None
        )
        lo, hi = (int(info.min), int(info.max)) if info else (-3, 3)
        if name in ("float4_e2m1fn",):
            lo, hi = 0, 3
        values = lo + np.arange(n) % (min(hi - lo, 6) + 1)
    return np.asarray(values).astype(dtype).reshape(shape)


def test_every_required_dtype_is_supported():
    assert {as_dtype(n) for n in REQUIRED} <= xlabind.SUPPORTED_DTYPES


def bits(a):
    """The raw bytes of `a` in C order: compares NaNs and -0.0 exactly."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def reversed_copy(a):
    return np.array(a.reshape(-1)[::-1].reshape(a.shape), order="C")


@pytest.mark.parametrize(
    "shape, name",
    cases.product("roundtrip", [(), (1,), (5,), (2, 3, 4), (7, 1, 3)], ALL, sampled=len(ALL)),
)
def test_roundtrip_under_jit(name, shape):
    x = sample(name, shape)
    seen = {}

    def reverse(a):
        seen["dtype"], seen["shape"], seen["writeable"] = a.dtype, a.shape, a.flags.writeable
        seen["values"] = np.array(a)
        return reversed_copy(a)

    op = xlabind.callback(reverse, lambda a: a)
    y = jax.jit(op)(jnp.asarray(x))
    assert seen["dtype"] == x.dtype and seen["shape"] == x.shape
    assert seen["writeable"] is False
    np.testing.assert_array_equal(bits(seen["values"]), bits(x))
    assert y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_array_equal(bits(np.asarray(y)), bits(reversed_copy(x)))
    # Eager calls take the same path.
    np.testing.assert_array_equal(bits(np.asarray(op(jnp.asarray(x)))), bits(reversed_copy(x)))


@pytest.mark.parametrize(
    "shape, name", cases.product("zero size", [(0,), (3, 0, 2)], ALL, sampled=len(ALL))
)
def test_zero_size_inputs_reach_the_callback(name, shape):
    x = sample(name, shape)
    seen = {}

    def describe(a):
        seen["shape"], seen["dtype"] = a.shape, a.dtype
        return np.array([a.size, a.ndim], np.int32), np.array(a)

    def spec(a):
        return jax.ShapeDtypeStruct((2,), jnp.int32), a

    count, same = jax.jit(xlabind.callback(describe, spec))(jnp.asarray(x))
    assert seen == {"shape": shape, "dtype": x.dtype}
    np.testing.assert_array_equal(count, [0, len(shape)])
    assert same.shape == shape and same.dtype == x.dtype


@pytest.mark.parametrize("name", ALL)
def test_in_place_output_is_writable(name):
    x = sample(name, (7,))

    def copy_into(a, *, out):
        assert out.flags.writeable and out.dtype == a.dtype
        out[...] = a

    y = xlabind.callback(copy_into, lambda a: a, in_place=True)(jnp.asarray(x))
    np.testing.assert_array_equal(bits(np.asarray(y)), bits(x))


def test_unsupported_dtype_is_a_clear_error():
    op = xlabind.callback(lambda a: a, lambda a: jax.ShapeDtypeStruct(a.shape, jax.dtypes.float0))
    with pytest.raises(TypeError, match=r"result 0 has dtype .*float0.*supported dtypes"):
        op(jnp.ones(2))
