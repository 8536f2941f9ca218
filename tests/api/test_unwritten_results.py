"""An in_place function that leaves a result unwritten is an error, not XLA's
uninitialised memory: on the CPU every in-place result of 4 bytes an element
or more (and bool) is marked before the call and checked after it, for every
constructor and every derived function (transposes, JVPs, VJPs). A result
that is an argument's memory (input_output_aliases) is never marked: it holds
the argument."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import xlabind

jax.config.update("jax_enable_x64", True)


def forgets(x, out):
    if x.shape[0] > 100:  # a path that skips the work
        out[...] = x


def test_the_issue_example():
    op = xlabind.callback(forgets, lambda x: x, in_place=True)
    for run in (lambda x: op(x), jax.jit(lambda x: op(x) * 1.0)):
        with pytest.raises(
            Exception,
            match=r"xlabind callback 'forgets' raised TypeError: "
            r"forgets wrote nothing into `out` \(its first and "
            r"last elements are still as xlabind left them\): an "
            r"in_place function must fill every result",
        ):
            jax.block_until_ready(run(jnp.arange(8.0)))


@pytest.mark.parametrize(
    "dtype",
    [
        np.float32,
        np.float64,
        np.int32,
        np.int64,
        np.uint32,
        np.uint64,
        np.complex64,
        np.complex128,
        np.bool_,
    ],
)
def test_every_checked_dtype(dtype):
    op = xlabind.callback(lambda x, out: None, lambda x: x, in_place=True, name="nothing")
    with pytest.raises(Exception, match="nothing wrote nothing into `out`"):
        jax.block_until_ready(jax.jit(op)(jnp.zeros(5, dtype)))
    # Written (any value, the sentinel's bits' neighbours included): no error.
    fills = xlabind.callback(
        lambda x, out: out.__setitem__(Ellipsis, x), lambda x: x, in_place=True
    )
    x = np.arange(5).astype(dtype)
    np.testing.assert_array_equal(jax.jit(fills)(x), x)


@pytest.mark.parametrize(
    "dtype", [np.int8, np.uint8, np.int16, np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn]
)
def test_elements_under_four_bytes_are_not_checked(dtype):
    # A legitimate value could equal any sentinel: these results are not
    # marked (docs/semantics.md: what in_place promises), and a correct function is
    # never refused.
    fill = xlabind.callback(lambda x, out: out.__setitem__(Ellipsis, x), lambda x: x, in_place=True)
    x = np.full(
        9, 0xA5 if np.dtype(dtype).itemsize == 1 and np.dtype(dtype).kind == "u" else 1
    ).astype(dtype)
    np.testing.assert_array_equal(np.asarray(jax.jit(fill)(x)), x)


@pytest.mark.parametrize("dtype, mark", [(np.int32, 2141562277), (np.uint64, 9220457942978241957)])
def test_an_integer_fill_with_the_mark_itself_reads_as_unwritten(dtype, mark):
    # The documented limit (docs/semantics.md): for 4- and 8-byte integers the
    # mark is a value; a result holding it at every marked element is refused,
    # one holding any other value is not.
    def fill(x, out, *, value):
        out[...] = value

    op = xlabind.callback(
        fill, lambda x, **_: jax.ShapeDtypeStruct((9,), dtype), in_place=True, name="fill"
    )
    x = jnp.ones(2)
    with pytest.raises(Exception, match=r"fill wrote nothing into `out`"):
        jax.block_until_ready(jax.jit(lambda x: op(x, value=mark))(x))
    np.testing.assert_array_equal(jax.jit(lambda x: op(x, value=mark - 1))(x), np.full(9, mark - 1))


def test_which_result_of_several():
    def half(x, out):
        out[0][...] = x

    op = xlabind.callback(half, lambda x: (x, x), in_place=True, name="half")
    with pytest.raises(Exception, match=r"half wrote nothing into result 1 of `out`"):
        jax.block_until_ready(jax.jit(op)(jnp.ones(3)))
    nested = xlabind.callback(
        lambda x, out: out["a"].__setitem__(Ellipsis, x),
        lambda x: {"a": x, "b": x},
        in_place=True,
        name="nested",
    )
    with pytest.raises(Exception, match=r"nested wrote nothing into result 1 of `out`"):
        jax.block_until_ready(jax.jit(nested)(jnp.ones(3)))


def test_a_partly_written_result_passes():
    # Only the ends are marked: writing either end counts as written. (The
    # check catches forgotten results, not forgotten elements.)
    def first_only(x, out):
        out[0] = 1.0

    op = xlabind.callback(first_only, lambda x: x, in_place=True)
    assert float(jax.jit(op)(jnp.zeros(16))[0]) == 1.0


def test_an_aliased_result_keeps_its_argument():
    # The result is the argument's memory: unwritten, it holds the argument.
    op = xlabind.callback(
        lambda x, out: None, lambda x: x, in_place=True, input_output_aliases={0: 0}
    )
    x = jnp.arange(6.0)
    np.testing.assert_array_equal(jax.jit(op, donate_argnums=0)(jnp.arange(6.0)), x)
    np.testing.assert_array_equal(jax.jit(op)(x), x)


def test_every_constructor_and_derived_function():
    good = lambda x, out: out.__setitem__(Ellipsis, 2 * x)
    linear = xlabind.linear(good, forgets, lambda x: x, in_place=True, name="scale")
    with pytest.raises(Exception, match=r"scale \(transpose\) wrote nothing into `out`"):
        jax.block_until_ready(jax.grad(lambda x: linear(x).sum())(jnp.ones(3)))
    multilinear = xlabind.multilinear(
        lambda a, b, out: None, [None, None], lambda a, b: a, in_place=True, name="product"
    )
    with pytest.raises(Exception, match=r"product wrote nothing into `out`"):
        jax.block_until_ready(multilinear(jnp.ones(3), jnp.ones(3)))
    nonlinear = xlabind.nonlinear(
        good, lambda x: x, jvp=lambda x, t, out: None, in_place=True, name="f"
    )
    with pytest.raises(Exception, match=r"f \(jvp\) wrote nothing into `out`"):
        jax.block_until_ready(jax.jvp(nonlinear, (jnp.ones(3),), (jnp.ones(3),))[1])


def test_a_failure_leaves_the_process_working():
    op = xlabind.callback(forgets, lambda x: x, in_place=True)
    with pytest.raises(Exception, match="wrote nothing"):
        jax.block_until_ready(jax.jit(op)(jnp.ones(3)))
    np.testing.assert_array_equal(jax.jit(op)(jnp.ones(128)), np.ones(128))
