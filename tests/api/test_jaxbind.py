"""xlabind.jaxbind, used the way jaxbind 1.3.1's documentation uses jaxbind."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from xlabind import jaxbind

jax.config.update("jax_enable_x64", True)


# -- (a) nonlinear f(x1, x2) = x1 * x2**2 with jvp and vjp ------------------------
def f(out, args, kwargs_dump):
    assert jaxbind.load_kwargs(kwargs_dump) == {}  # no keyword arguments in these calls
    x1, x2 = args
    out[0][()] = x1 * x2**2


def f_jvp(out, args, kwargs_dump):
    x1, x2, dx1, dx2 = args
    out[0][()] = x2**2 * dx1 + 2 * x1 * x2 * dx2


def f_vjp(out, args, kwargs_dump):
    x1, x2, dy = args
    out[0][()] = x2**2 * dy
    out[1][()] = 2 * x1 * x2 * dy


def f_abstract(*args, **kwargs):
    assert args[0].shape == args[1].shape
    return ((args[0].shape, args[0].dtype),)


def f_abstract_T(*args, **kwargs):
    return ((args[0].shape, args[0].dtype), (args[0].shape, args[0].dtype))


def test_nonlinear_as_documented():
    f_jax = jaxbind.get_nonlinear_call(f, (f_jvp, f_vjp), f_abstract, f_abstract_T)
    inp = (jnp.full((4, 3), 4.0), jnp.full((4, 3), 2.0))
    tan = (jnp.full((4, 3), 1.0), jnp.full((4, 3), 1.0))
    res = f_jax(*inp)
    assert isinstance(res, list) and len(res) == 1
    np.testing.assert_allclose(res[0], 16.0)
    _, res_tan = jax.jvp(f_jax, inp, tan)
    np.testing.assert_allclose(res_tan[0], 4.0 + 16.0)
    _, pullback = jax.vjp(f_jax, *inp)
    g1, g2 = pullback([jnp.full((4, 3), 6.0)])
    np.testing.assert_allclose(g1, 4.0 * 6.0)
    np.testing.assert_allclose(g2, 2 * 4.0 * 2.0 * 6.0)
    np.testing.assert_allclose(jax.jit(f_jax)(*inp)[0], 16.0)
    check_grads(f_jax, inp, order=1, modes=("fwd", "rev"))


def test_nonlinear_with_a_fixed_argument():
    # f(x, y) = (x y, y**2) with x fixed.
    def g(out, args, kd):
        x, y = args
        out[0][()] = x * y
        out[1][()] = y**2

    def g_jvp(out, args, kd):
        x, y, dy = args
        out[0][()] = x * dy
        out[1][()] = 2 * y * dy

    def g_vjp(out, args, kd):
        x, y, da, db = args
        out[0][()] = x * da + 2 * y * db

    def g_abstract(x, y, *_, **kw):
        return ((x.shape, x.dtype), (x.shape, x.dtype))

    def g_abstract_T(*args, **kw):
        return ((args[0].shape, args[0].dtype),)

    op = jaxbind.get_nonlinear_call(
        g, (g_jvp, g_vjp), g_abstract, g_abstract_T, first_n_args_fixed=1
    )
    x, y = jnp.full(3, 2.0), jnp.arange(3.0)
    check_grads(lambda y: op(x, y), (y,), order=1, modes=("fwd", "rev"))
    with pytest.raises(TypeError, match="argument 0 is one of the first_n_args_fixed=1"):
        jax.grad(lambda x: op(x, y)[0].sum())(x)


# -- (b) the multilinear product --------------------------------------------------
def mlin(out, args, kwargs_dump):
    out[0][()] = args[0] * args[1]
    out[1][()] = args[0] * args[1]


def mlin_T1(out, args, kwargs_dump):
    y, da, db = args
    out[0][()] = y * da + y * db


def mlin_T2(out, args, kwargs_dump):
    x, da, db = args
    out[0][()] = x * da + x * db


def mlin_abstract(*args, **kwargs):
    assert args[0].shape == args[1].shape
    return ((args[0].shape, args[0].dtype),) * 2


def mlin_abstract_T(*args, **kwargs):
    return ((args[0].shape, args[0].dtype),)


def test_multilinear_as_documented():
    op = jaxbind.get_linear_call(
        mlin, (mlin_T1, mlin_T2), mlin_abstract, (mlin_abstract_T, mlin_abstract_T)
    )
    rng = np.random.default_rng(42)
    inp = (jnp.asarray(rng.random((10, 10))), jnp.asarray(rng.random((10, 10))))
    a, b = op(*inp)
    np.testing.assert_allclose(a, inp[0] * inp[1])
    np.testing.assert_allclose(jax.jit(op)(*inp)[1], inp[0] * inp[1])
    _, t = jax.jvp(jax.jit(op), inp, inp)
    np.testing.assert_allclose(t[0], 2 * inp[0] * inp[1])
    check_grads(op, inp, order=2, modes=("fwd", "rev"))


# -- (c) a linear FFT with its transpose and native batching ------------------------
def c2c(out, args, kwargs_dump):
    (x,) = args
    kwargs = jaxbind.load_kwargs(kwargs_dump)
    batch_axes = kwargs.pop("batch_axes", None)
    axes = list(range(x.ndim))
    if batch_axes:
        axes = [a for a in axes if a not in batch_axes[0]]
    out[0][...] = np.fft.fftn(x, axes=axes, **kwargs)


def c2c_abstract(*args, **kwargs):
    batch_axes = kwargs.pop("batch_axes", None)
    out_axis = batch_axes[0][-1] if batch_axes and batch_axes[0] else ()
    return ((args[0].shape, args[0].dtype, out_axis),)


def test_linear_fft_with_native_batching():
    fft = jaxbind.get_linear_call(c2c, c2c, c2c_abstract, c2c_abstract, func_can_batch=True)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(10, 10)) + 1j * rng.normal(size=(10, 10)))
    np.testing.assert_allclose(fft(x)[0], np.fft.fft2(x), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(
        fft(x, norm="ortho")[0], np.fft.fft2(x, norm="ortho"), rtol=1e-10, atol=1e-10
    )
    np.testing.assert_allclose(jax.jit(fft)(x)[0], np.fft.fft2(x), rtol=1e-10, atol=1e-10)
    batched = jax.vmap(lambda v: fft(v)[0], in_axes=0)
    np.testing.assert_allclose(batched(x), np.fft.fft(x, axis=1), rtol=1e-10, atol=1e-10)
    _, t = jax.jvp(lambda v: fft(v)[0], (x,), (x,))
    np.testing.assert_allclose(t, np.fft.fft2(x), rtol=1e-10, atol=1e-10)
    check_grads(lambda v: fft(v)[0], (x,), order=2, modes=("fwd", "rev"))
    check_grads(batched, (x,), order=2, modes=("fwd", "rev"))


def test_kwargs_reach_callbacks_through_load_kwargs():
    seen = []

    def scale(out, args, kd):
        kwargs = jaxbind.load_kwargs(kd)
        seen.append(kwargs)
        out[0][()] = kwargs["factor"] * args[0]

    abstract = lambda x, **kw: ((x.shape, x.dtype),)
    op = jaxbind.get_linear_call(scale, scale, abstract, abstract)
    np.testing.assert_allclose(op(jnp.ones(2), factor=3.0)[0], [3.0, 3.0])
    assert seen[-1] == {"factor": 3.0}
    np.testing.assert_allclose(
        jax.grad(lambda x: op(x, factor=2.0)[0].sum())(jnp.ones(2)), [2.0, 2.0]
    )


def test_rebinding_an_output_instead_of_writing_into_it_is_an_error():
    def rebinds(out, args, kwargs_dump):
        (x,) = args
        out[0] = 2 * x  # replaces the list entry; XLA's buffer stays unwritten

    op = jaxbind.get_linear_call(rebinds, None, lambda x, **kw: ((x.shape, x.dtype),), None)
    with pytest.raises(
        Exception,
        match=r"rebinds replaced out\[0\] instead of writing into it.*"
        r"out\[0\]\[\(\)\] = value",
    ):
        jax.jit(op)(jnp.ones(3))[0].block_until_ready()


# -- mistakes a jaxbind user makes get errors, never uninitialised memory ------
def _double(out, args, kwargs_dump):
    out[0][...] = 2 * args[0]


def _abstract_like(*args, **kwargs):
    return ((args[0].shape, args[0].dtype),)


def test_a_callback_that_returns_its_result_is_an_error():
    def returns(out, args, kwargs_dump):
        return 2 * args[0]

    op = jaxbind.get_linear_call(returns, _double, _abstract_like, _abstract_like)
    with pytest.raises(
        Exception,
        match=r"returns is a jaxbind callback: it must write its "
        r"results into `out` .* but it returned numpy.ndarray",
    ):
        jax.jit(op)(jnp.ones(3))[0].block_until_ready()


@pytest.mark.parametrize("shape", [(3,), (1,), (2, 50), ()])
def test_a_vjp_that_writes_nothing_is_an_error(shape):
    def writes_nothing(out, args, kwargs_dump):
        pass

    op = jaxbind.get_linear_call(_double, writes_nothing, _abstract_like, _abstract_like)
    x = jnp.ones(shape)
    np.testing.assert_array_equal(op(x)[0], 2 * np.ones(shape))
    with pytest.raises(
        Exception,
        match=r"writes_nothing \(_double \(transpose\)\) wrote nothing "
        r"into out\[0\]",
    ):
        jax.grad(lambda x: op(x)[0].sum())(x).block_until_ready()


def test_a_callback_that_writes_the_sentinel_value_itself_is_not_mistaken():
    # A result that legitimately holds NaNs, zeros, or extreme values passes.
    for value in (np.nan, 0.0, -np.inf, np.finfo(np.float64).max):
        op = jaxbind.get_linear_call(
            lambda out, args, kd, v=value: out[0].__setitem__(..., v),
            _double,
            _abstract_like,
            _abstract_like,
        )
        np.testing.assert_array_equal(jax.jit(op)(jnp.ones(4))[0], np.full(4, value))


def test_changing_the_out_list_is_an_error():
    def appends(out, args, kwargs_dump):
        out[0][...] = args[0]
        out.append(None)

    op = jaxbind.get_linear_call(appends, _double, _abstract_like, _abstract_like)
    with pytest.raises(Exception, match=r"appends changed the length of `out`"):
        jax.jit(op)(jnp.ones(3))[0].block_until_ready()


def test_an_abstract_returning_one_pair_instead_of_a_tuple_of_them_says_so():
    op = jaxbind.get_linear_call(_double, _double, lambda x: (x.shape, x.dtype), _abstract_like)
    with pytest.raises(
        TypeError,
        match=r"returned one \(shape, dtype\) pair, .*wrap it in a "
        r"tuple",
    ):
        op(jnp.ones(3))
    op = jaxbind.get_linear_call(_double, _double, lambda x: 3, _abstract_like)
    with pytest.raises(TypeError, match=r"returned int; expected one \(shape, dtype\)"):
        op(jnp.ones(3))


def test_a_batch_axes_keyword_without_func_can_batch_is_the_callers_own():
    seen = []

    def records(out, args, kwargs_dump):
        seen.append(jaxbind.load_kwargs(kwargs_dump))
        out[0][...] = args[0]

    op = jaxbind.get_linear_call(records, _double, _abstract_like, _abstract_like)
    op(jnp.ones(3), batch_axes=1)
    assert seen[-1] == {"batch_axes": 1}


def test_first_n_args_fixed_is_checked_and_named():
    with pytest.raises(ValueError, match=r"first_n_args_fixed must be 0 or more, got -1"):
        jaxbind.get_linear_call(
            _double, _double, _abstract_like, _abstract_like, first_n_args_fixed=-1
        )
    op = jaxbind.get_linear_call(
        _double, _double, _abstract_like, _abstract_like, first_n_args_fixed=2
    )
    with pytest.raises(
        ValueError,
        match=r"first_n_args_fixed=2, but the call has only 1 "
        r"positional arguments",
    ):
        op(jnp.ones(3))


def _triple(out, args, kwargs_dump):
    out[0][()] = 3 * args[-1]


def _shapes(*args, **kwargs):
    return ((args[-1].shape, args[-1].dtype),)


def test_errors_use_jaxbinds_own_words():
    """What jaxbind's users wrote (f_T, f_derivative, first_n_args_fixed),
    not xlabind.linear's parameters."""
    no_transpose = jaxbind.get_linear_call(_triple, None, _shapes, None)
    with pytest.raises(TypeError, match=r"Pass f_T \(the transpose\) to jaxbind.get_linear_call"):
        jax.grad(lambda x: no_transpose(x)[0].sum())(jnp.ones(2))
    fixed = jaxbind.get_linear_call(_triple, _triple, _shapes, _shapes, first_n_args_fixed=1)
    with pytest.raises(TypeError, match=r"argument 0 is one of the first_n_args_fixed=1 arguments"):
        jax.grad(lambda w, x: fixed(w, x)[0].sum())(jnp.ones(2), jnp.ones(2))

    def jvp(out, args, kwargs_dump):
        out[0][()] = 2 * args[0] * args[1]

    def square(out, args, kwargs_dump):
        out[0][()] = args[0] ** 2

    no_vjp = jaxbind.get_nonlinear_call(square, (jvp, None), _shapes, None)
    with pytest.raises(TypeError, match=r"Pass f_derivative=\(jvp, vjp\) with a vjp") as error:
        jax.grad(lambda x: no_vjp(x)[0].sum())(jnp.ones(2))
    for word in ("xlabind.linear", "xlabind.nonlinear", "nondiff_argnums", "transpose="):
        assert word not in str(error.value)
    # Forward mode needs no vjp.
    _, tangent = jax.jvp(lambda x: no_vjp(x)[0], (jnp.ones(2),), (jnp.ones(2),))
    np.testing.assert_array_equal(tangent, [2.0, 2.0])


@pytest.mark.parametrize("make", ["linear", "nonlinear"])
def test_stop_all_devices_reaches_the_bound_function(make):
    if make == "linear":
        op = jaxbind.get_linear_call(_triple, _triple, _shapes, _shapes, stop_all_devices=False)
    else:
        op = jaxbind.get_nonlinear_call(
            _triple, (_triple, _triple), _shapes, _shapes, stop_all_devices=False
        )
    assert op.xlabind_op.definition.stop_all_devices is False
    np.testing.assert_array_equal(op(jnp.ones(2))[0], [3.0, 3.0])
