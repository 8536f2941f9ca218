"""xlabind.callback: results, structure, static kwargs, eager vs jit, zero copy."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xlabind

jax.config.update("jax_enable_x64", True)


def test_eager_and_jit_agree_with_numpy():
    op = xlabind.callback(np.cumsum, lambda x: x)
    x = jnp.arange(10.0)
    np.testing.assert_array_equal(op(x), np.cumsum(np.arange(10.0)))
    np.testing.assert_array_equal(jax.jit(op)(x), np.cumsum(np.arange(10.0)))


def test_many_inputs_and_a_pytree_of_outputs():
    def f(a, b, c):
        return {"sum": a + b + c, "prod": (a * b * c).astype(np.float32), "n": np.int64(a.size)}

    def spec(a, b, c):
        return {
            "sum": a,
            "prod": jax.ShapeDtypeStruct(a.shape, jnp.float32),
            "n": jax.ShapeDtypeStruct((), jnp.int64),
        }

    op = xlabind.callback(f, spec)
    a, b, c = jnp.arange(3.0), jnp.ones(3) * 2, jnp.full(3, 3.0)
    out = jax.jit(op)(a, b, c)
    np.testing.assert_array_equal(out["sum"], [5.0, 6.0, 7.0])
    np.testing.assert_array_equal(out["prod"], np.array([0.0, 6.0, 12.0], np.float32))
    assert out["prod"].dtype == jnp.float32 and int(out["n"]) == 3


def test_no_inputs_and_ten_outputs():
    specs = tuple(jax.ShapeDtypeStruct((i,), jnp.int32) for i in range(10))
    op = xlabind.callback(lambda: tuple(np.full(i, i, np.int32) for i in range(10)), specs)
    outs = jax.jit(op)()
    for i, o in enumerate(outs):
        np.testing.assert_array_equal(o, np.full(i, i))


def test_static_kwargs_reach_the_callback_as_python_objects():
    seen = []

    def f(x, *, scale, names, mode):
        seen.append((scale, names, mode))
        return x * scale

    op = xlabind.callback(f, lambda x, **_: x)
    jitted = jax.jit(lambda x: op(x, scale=3, names=("a", "b"), mode=None))
    np.testing.assert_array_equal(jitted(jnp.ones(2)), [3.0, 3.0])
    assert seen[-1] == (3, ("a", "b"), None) and type(seen[-1][0]) is int
    # A different value is a different computation: the callback sees it.
    np.testing.assert_array_equal(op(jnp.ones(2), scale=5, names=(), mode="x"), [5.0, 5.0])
    assert seen[-1] == (5, (), "x")


def test_static_kwargs_of_equal_value_but_other_type_stay_distinct():
    seen = []
    op = xlabind.callback(lambda x, *, k: seen.append(type(k)) or x, lambda x, **_: x)
    op(jnp.ones(1), k=1)
    op(jnp.ones(1), k=1.0)
    assert seen == [int, float]


def test_result_shape_may_depend_on_static_kwargs():
    op = xlabind.callback(
        lambda x, *, n: np.tile(x, n),
        lambda x, *, n: jax.ShapeDtypeStruct((x.shape[0] * n,), x.dtype),
    )
    np.testing.assert_array_equal(jax.jit(lambda x: op(x, n=3))(jnp.arange(2)), [0, 1] * 3)


def test_unhashable_kwarg_is_a_clear_error():
    op = xlabind.callback(lambda x, **_: x, lambda x, **_: x)
    with pytest.raises(TypeError, match=r"keyword argument 'k' must be hashable.*list.*tuple"):
        op(jnp.ones(2), k=[1, 2])


def test_traced_kwarg_is_a_clear_error():
    op = xlabind.callback(lambda x, **_: x, lambda x, **_: x)
    with pytest.raises(TypeError, match=r"keyword argument 'k' is a traced JAX array.*positional"):
        jax.jit(lambda x: op(x, k=x))(jnp.ones(2))


@pytest.mark.parametrize(
    "returned, spec, message",
    [
        (
            lambda x: x,
            lambda x: jax.ShapeDtypeStruct(x.shape, jnp.float32),
            r"result 0 has dtype float64, expected dtype float32 and shape \(3,\)",
        ),
        (
            lambda x: x[:2],
            lambda x: x,
            r"result 0 has shape \(2,\), expected dtype float64 and shape \(3,\)",
        ),
        (lambda x: {"a": x}, lambda x: (x, x), r"does not match the declared result structure"),
        (lambda x: (x,), lambda x: (x, x), r"does not match the declared result structure"),
    ],
)
def test_wrong_results_are_reported_with_expected_and_actual(returned, spec, message):
    op = xlabind.callback(returned, spec, name="mine")
    with pytest.raises(Exception, match=r"xlabind callback 'mine' raised .*" + message):
        jax.jit(op)(jnp.ones(3))


def test_in_place_callback_must_return_none():
    op = xlabind.callback(lambda x, *, out: x, lambda x: x, in_place=True, name="inplace")
    with pytest.raises(Exception, match=r"in_place function: it must write into `out`"):
        op(jnp.ones(3))


def test_bad_arguments_name_the_function():
    with pytest.raises(TypeError, match=r"the function for 'cpu' must be callable, got int"):
        xlabind.callback(42, lambda: ())
    op = xlabind.callback(lambda x: x, lambda x: x, name="named")
    with pytest.raises(TypeError, match=r"named: argument 0 must be an array, got object"):
        op(object())
    # jnp.asarray raises ValueError for these, naming neither function nor argument.
    for value, kind in (({"a": jnp.ones(2)}, "dict"), (None, "NoneType"), ([[1], [1, 2]], "list")):
        with pytest.raises(TypeError, match=rf"named: argument 0 must be an array, got {kind}"):
            op(value)
    bad_spec = xlabind.callback(lambda x: x, lambda x: [1], name="spec")
    with pytest.raises(
        TypeError, match=r"spec: result_shape_dtypes must be a pytree.*leaf 0 is int"
    ):
        bad_spec(jnp.ones(1))


def test_inputs_are_zero_copy_views_of_xla_buffers():
    x = jax.device_put(jnp.arange(1000.0))
    seen = {}

    def f(a):
        seen["address"] = a.__array_interface__["data"][0]
        seen["owns"] = a.flags.owndata
        return a

    jax.jit(xlabind.callback(f, lambda a: a))(x)
    assert seen["owns"] is False
    assert seen["address"] == x.unsafe_buffer_pointer()


def test_inputs_are_read_only():
    def scribble(a):
        a[0] = 1.0
        return a

    with pytest.raises(Exception, match=r"ValueError: assignment destination is read-only"):
        jax.jit(xlabind.callback(scribble, lambda a: a))(jnp.zeros(3))


def test_large_arrays_ten_million_elements():
    n = 10_000_000
    # np.multiply(..., out=) returns `out`; in_place callbacks return None.
    op = xlabind.callback(
        lambda x, *, out: (np.multiply(x, 2.0, out=out), None)[1], lambda x: x, in_place=True
    )
    y = jax.jit(op)(jnp.arange(n, dtype=jnp.float64))
    assert y.shape == (n,)
    assert float(y[n - 1]) == 2.0 * (n - 1) and float(jnp.sum(y)) == float(n) * (n - 1)


def test_lowering_for_gpu_says_cpu_only():
    op = xlabind.callback(lambda x: x, lambda x: x, name="cpu_fn")
    traced = jax.jit(op).trace(jnp.ones(2))
    with pytest.raises(NotImplementedError, match=r"'cpu_fn' has no CUDA implementation"):
        traced.lower(lowering_platforms=("cuda",))


def test_a_bound_function_deep_copies_before_and_after_its_first_call():
    # As a jitted function does: a model config or dict holding one copies.
    import copy

    op = xlabind.linear(
        lambda x: 2 * np.asarray(x), lambda ct: 2 * np.asarray(ct), lambda x: x, name="twice"
    )
    config = {"op": op, "scale": [1.0]}
    before = copy.deepcopy(config)
    assert before["op"] is op and before["scale"] is not config["scale"]
    np.testing.assert_array_equal(jax.jit(op)(jnp.arange(3.0)), [0.0, 2.0, 4.0])
    np.testing.assert_array_equal(op(jnp.arange(3.0)), [0.0, 2.0, 4.0])  # eager executable
    after = copy.deepcopy(config)
    assert after["op"] is op and copy.copy(op) is op
    assert copy.deepcopy(op.definition) is op.definition
    np.testing.assert_array_equal(
        jax.jit(jax.grad(lambda x: after["op"](x).sum()))(jnp.arange(3.0)), [2.0, 2.0, 2.0]
    )


def test_an_exception_is_raised_as_jax_raises_pure_callbacks_own():
    """The first failure of a program is a jax.errors.JaxRuntimeError; once
    the program has run, jax's fast path raises the same message as a plain
    ValueError (for jax.pure_callback too). Whichever, the type is jax's
    own for its callbacks, and the message names the function."""

    def checked_sqrt(x):
        if (np.asarray(x) < 0).any():
            raise ValueError("checked_sqrt: negative input")
        return np.sqrt(x)

    ours = jax.jit(xlabind.callback(checked_sqrt, lambda x: x))
    theirs = jax.jit(
        lambda x: jax.pure_callback(checked_sqrt, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    )

    def raised(f, x):
        try:
            f(x).block_until_ready()
        except Exception as error:  # the type is what is compared
            return error
        return None

    for f in (ours, theirs):
        assert isinstance(raised(f, -jnp.ones(3)), jax.errors.JaxRuntimeError)
    for x in (jnp.ones(3), -jnp.ones(3), -jnp.ones(3)):
        mine, jaxs = raised(ours, x), raised(theirs, x)
        assert type(mine) is type(jaxs), (mine, jaxs)
        if mine is not None:
            assert isinstance(mine, (jax.errors.JaxRuntimeError, ValueError))
            assert re.search(
                r"xlabind callback '\S*checked_sqrt' raised ValueError: checked_sqrt", str(mine)
            )
