"""input_output_aliases: a result written into an argument's buffer, under jit
(with donation: no copy at all), vmap, grad and sharding, for Python
callbacks and native targets."""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
)

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import xlabind


def _double_in_place(x, out):
    out[...] = 2 * x


def doubler(**options):
    return xlabind.callback(
        _double_in_place, lambda x: x, in_place=True, input_output_aliases={0: 0}, **options
    )


def test_donated_argument_becomes_the_result_in_place():
    x = jnp.arange(4.0)
    before = x.unsafe_buffer_pointer()
    y = jax.jit(doubler(), donate_argnums=0)(x)
    np.testing.assert_array_equal(y, [0.0, 2.0, 4.0, 6.0])
    assert y.unsafe_buffer_pointer() == before
    assert x.is_deleted()


def test_donated_argument_becomes_the_result_returning():
    op = xlabind.callback(lambda x, s: x * s, lambda x, s: x, input_output_aliases={0: 0})
    x = jnp.arange(4.0)
    before = x.unsafe_buffer_pointer()
    y = jax.jit(op, donate_argnums=0)(x, jnp.float32(3))
    np.testing.assert_array_equal(y, [0.0, 3.0, 6.0, 9.0])
    assert y.unsafe_buffer_pointer() == before


def test_without_donation_the_argument_keeps_its_values():
    x = jnp.arange(4.0)
    y = jax.jit(doubler())(x)
    np.testing.assert_array_equal(y, [0.0, 2.0, 4.0, 6.0])
    np.testing.assert_array_equal(x, [0.0, 1.0, 2.0, 3.0])
    # Eagerly, too (the argument is not donated: XLA copies it first).
    np.testing.assert_array_equal(doubler()(x), [0.0, 2.0, 4.0, 6.0])
    np.testing.assert_array_equal(x, [0.0, 1.0, 2.0, 3.0])


def test_in_place_out_is_the_arguments_memory():
    seen = {}

    def fn(x, out):
        seen["same"] = x.__array_interface__["data"][0] == out.__array_interface__["data"][0]
        seen["before"] = np.array(x)
        out[...] = x + 10
        # Documented: the argument's view is the same memory, so it now shows
        # what was written.
        seen["after"] = np.array(x)

    op = xlabind.callback(fn, lambda x: x, in_place=True, input_output_aliases={0: 0})
    y = jax.jit(op, donate_argnums=0)(jnp.arange(3.0))
    np.testing.assert_array_equal(y, [10.0, 11.0, 12.0])
    assert seen["same"] is True
    np.testing.assert_array_equal(seen["before"], [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(seen["after"], [10.0, 11.0, 12.0])


def test_returned_views_of_an_aliased_argument_are_stored_correctly():
    # Result 0 is aliased to x; result 1 is x itself. Storing result 0 first
    # must not change what result 1 receives.
    op = xlabind.callback(lambda x: (x + 1, x), lambda x: (x, x), input_output_aliases={0: 0})
    a, b = jax.jit(op, donate_argnums=0)(jnp.arange(3.0))
    np.testing.assert_array_equal(a, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(b, [0.0, 1.0, 2.0])


def test_lowered_with_the_alias():
    text = jax.jit(doubler()).lower(jnp.ones(3)).as_text()
    assert "output_operand_alias" in text
    plain = xlabind.callback(_double_in_place, lambda x: x, in_place=True)
    assert "output_operand_alias" not in jax.jit(plain).lower(jnp.ones(3)).as_text()


def test_a_second_argument_aliased_to_a_second_result():
    def fn(a, b, out):
        out[0][...] = a.sum()
        out[1][...] = b * a.sum()

    op = xlabind.callback(
        fn,
        lambda a, b: (jax.ShapeDtypeStruct((), a.dtype), b),
        in_place=True,
        input_output_aliases={1: 1},
    )
    b = jnp.arange(3.0)
    before = b.unsafe_buffer_pointer()
    total, scaled = jax.jit(op, donate_argnums=1)(jnp.ones(2), b)
    assert float(total) == 2.0
    np.testing.assert_array_equal(scaled, [0.0, 2.0, 4.0])
    assert scaled.unsafe_buffer_pointer() == before


# -- native targets ------------------------------------------------------------


def test_native_target_writes_into_the_argument():
    # xlabind_noop writes nothing: with the alias its result is its argument.
    noop = xlabind.callback(
        xlabind.ffi_target("xlabind_noop"), lambda x: x, input_output_aliases={0: 0}
    )
    x = jnp.arange(5.0) * 3
    np.testing.assert_array_equal(jax.jit(noop)(x), x)
    y = jnp.arange(5.0) * 3
    before = y.unsafe_buffer_pointer()
    z = jax.jit(noop, donate_argnums=0)(y)
    assert z.unsafe_buffer_pointer() == before
    np.testing.assert_array_equal(z, np.arange(5.0) * 3)


# -- static checks -------------------------------------------------------------


@pytest.mark.parametrize(
    "aliases, args, message",
    [
        ({0: 0}, (np.ones(3, np.float32),), None),
        (
            {0: 0},
            (np.ones(4, np.float32),),
            r"my_op: input_output_aliases maps argument 0 to result 0, which must have one "
            r"shape and "
            r"dtype: argument 0 has shape \(4,\) and dtype float32, result 0 has shape \(3,\)",
        ),
        (
            {0: 0},
            (np.ones(3, np.int32),),
            r"my_op: .*argument 0 has shape \(3,\) and dtype int32, result 0 has shape \(3,\) and "
            r"dtype float32",
        ),
        (
            {1: 0},
            (np.ones(3, np.float32),),
            r"my_op: input_output_aliases maps argument 1 to result 0, "
            r"but the call has 1 arguments",
        ),
        (
            {0: 2},
            (np.ones(3, np.float32),),
            r"my_op: input_output_aliases maps argument 0 to result 2, "
            r"but the function has 1 results",
        ),
    ],
)
def test_checked_when_called(aliases, args, message):
    op = xlabind.callback(
        lambda x: np.zeros(3, np.float32),
        lambda *a: jax.ShapeDtypeStruct((3,), np.float32),
        input_output_aliases=aliases,
        name="my_op",
    )
    if message is None:
        np.testing.assert_array_equal(op(*args), np.zeros(3))
        return
    with pytest.raises(ValueError, match=message):
        jax.jit(op)(*args)


def test_checked_when_bound():
    with pytest.raises(
        ValueError,
        match=r"my_op: input_output_aliases aliases result 0 to "
        r"several arguments \(\[0, 1\]\)",
    ):
        xlabind.callback(np.add, lambda x, y: x, input_output_aliases={0: 0, 1: 0}, name="my_op")
    with pytest.raises(
        TypeError,
        match="my_op: input_output_aliases maps -1 to 0; the argument "
        "index must be a non-negative int",
    ):
        xlabind.callback(np.negative, lambda x: x, input_output_aliases={-1: 0}, name="my_op")
    with pytest.raises(TypeError, match="my_op: input_output_aliases must be a dict"):
        xlabind.callback(np.negative, lambda x: x, input_output_aliases=[(0, 0)], name="my_op")
    op = xlabind.callback(np.negative, lambda x: x, input_output_aliases={np.int64(0): 0})
    assert op.input_output_aliases == {0: 0}


# -- vmap ----------------------------------------------------------------------


def _calls(fn, *args) -> str:
    return str(jax.make_jaxpr(fn)(*args))


def _add_in_place(x, y, out):
    out[...] = x + y


@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all"])
def test_vmap_keeps_the_alias_where_shapes_match(method):
    op = xlabind.callback(
        _add_in_place,
        lambda x, y: x,
        in_place=True,
        vmap_method=method,
        input_output_aliases={0: 0},
    )
    xs, y = jnp.arange(6.0).reshape(3, 2), jnp.ones(2)
    expected = np.arange(6.0).reshape(3, 2) + 1
    # x batched: its batched shape is the result's.
    np.testing.assert_array_equal(jax.jit(jax.vmap(op, (0, None)))(xs, y), expected)
    assert "aliases={0: 0}" in _calls(jax.vmap(op, (0, None)), xs, y)
    # x not batched: expand_dims broadcasts it to the result's shape too, so
    # the alias holds under every method.
    np.testing.assert_array_equal(jax.jit(jax.vmap(op, (None, 0)))(y, xs), expected)
    assert "aliases={0: 0}" in _calls(jax.vmap(op, (None, 0)), y, xs)


def _accumulate(x, y, out):
    out += y  # out *is* x's memory: it holds x's values


def _accumulate_native(x, y, out, batch_axes):
    # y laid out as out (the shape function below gives the result y's axis).
    out += np.asarray(y)


def _like_y(x, y, batch_axes=None):
    if not batch_axes:
        return x
    axis = batch_axes[1][-1] if batch_axes[1][-1] is not None else batch_axes[0][-1]
    return xlabind.BatchedResult(
        y.shape if batch_axes[1][-1] is not None else x.shape, x.dtype, axis
    )


@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all", "native"])
@pytest.mark.parametrize("axes", [(None, 0), (0, None), (0, 0), (None, 1), (1, 0)])
def test_an_in_place_update_reads_the_argument_under_every_vmap(method, axes):
    # The aliased argument unbatched (or batched along another axis than the
    # result): the function still finds its values in `out`.
    if method == "native":
        op = xlabind.callback(
            _accumulate_native,
            _like_y,
            in_place=True,
            vmap_method="native",
            input_output_aliases={0: 0},
        )
    else:
        op = xlabind.callback(
            _accumulate,
            lambda x, y: x,
            in_place=True,
            vmap_method=method,
            input_output_aliases={0: 0},
        )
    rng = np.random.default_rng(1)
    base = rng.normal(size=(4,))
    x = base if axes[0] is None else np.stack([base * (k + 1) for k in range(3)], axes[0])
    y = (
        rng.normal(size=(4,))
        if axes[1] is None
        else rng.normal(size=(3, 4) if axes[1] == 0 else (4, 3))
    )
    want = jax.vmap(lambda a, b: a + b, axes)(x, y)
    np.testing.assert_allclose(jax.vmap(op, axes)(x, y), want, rtol=1e-12)
    np.testing.assert_allclose(jax.jit(jax.vmap(op, axes))(x, y), want, rtol=1e-12)
    assert "aliases={0: 0}" in _calls(jax.vmap(op, axes), x, y)
    # Nested: an outer vmap over a second batch of x only.
    xs = np.stack([x, 2 * x])
    nested = jax.jit(jax.vmap(jax.vmap(op, axes), (0, None)))(xs, y)
    np.testing.assert_allclose(
        nested, np.stack([want, jax.vmap(lambda a, b: a + b, axes)(2 * x, y)]), rtol=1e-12
    )


def test_vmap_native_keeps_matching_aliases_only():
    def fn(x, y, out, batch_axes):
        out[...] = np.asarray(x) + np.asarray(y)

    def shapes(x, y, batch_axes=None):
        if not batch_axes or batch_axes[1][-1] is None:
            return xlabind.BatchedResult(
                x.shape, x.dtype, None if not batch_axes else batch_axes[0][-1]
            )
        return xlabind.BatchedResult(y.shape, y.dtype, batch_axes[1][-1])

    op = xlabind.callback(
        fn, shapes, in_place=True, vmap_method="native", input_output_aliases={0: 0}
    )
    xs, ys = jnp.arange(6.0).reshape(3, 2), jnp.ones((3, 2))
    np.testing.assert_array_equal(jax.jit(jax.vmap(op))(xs, ys), np.asarray(xs) + 1)
    assert "aliases={0: 0}" in _calls(jax.vmap(op), xs, ys)
    # x unbatched, y batched: the result is batched like y, so x is given
    # the result's batch axis and the alias holds.
    got = jax.jit(jax.vmap(op, (None, 0)))(jnp.ones(2), ys)
    np.testing.assert_array_equal(got, np.full((3, 2), 2.0))
    assert "aliases={0: 0}" in _calls(jax.vmap(op, (None, 0)), jnp.ones(2), ys)


def test_vmap_native_that_cannot_keep_an_alias_says_so():
    def fn(x, out, batch_axes):
        out[...] = 0

    def shapes(x, batch_axes=None):
        # Whatever axis x is batched along, the result's batch axis is another.
        if not batch_axes:
            return x
        axis = 1 if batch_axes[0][-1] == 0 else 0
        shape = list(x.shape)
        size = shape.pop(batch_axes[0][-1])
        shape.insert(axis, size)
        return xlabind.BatchedResult(tuple(shape), x.dtype, axis)

    op = xlabind.callback(
        fn, shapes, in_place=True, vmap_method="native", input_output_aliases={0: 0}, name="my_op"
    )
    with pytest.raises(
        ValueError,
        match=r"my_op: under jax.vmap \(vmap_method='native'\) "
        r"argument 0 .*input_output_aliases=\{0: 0\} cannot "
        r"hold",
    ):
        jax.jit(jax.vmap(op)).lower(jnp.ones((2, 3)))


# -- derivatives ---------------------------------------------------------------


def test_grad_calls_are_not_aliased():
    scale = xlabind.linear(
        lambda x: 3 * x, lambda ct: 3 * ct, lambda x: x, input_output_aliases={0: 0}
    )
    x = jnp.arange(3.0)
    np.testing.assert_array_equal(
        jax.jit(jax.grad(lambda x: (scale(x) * x).sum()))(x), 6 * np.arange(3.0)
    )
    jaxpr = _calls(jax.grad(lambda x: (scale(x) * x).sum()), x)
    assert jaxpr.count("aliases={0: 0}") == 1  # the forward call only
    assert "(transpose)" in jaxpr


def test_nonlinear_jvp_and_vjp_are_not_aliased():
    square = xlabind.nonlinear(
        lambda x: x * x,
        lambda x: x,
        jvp=lambda x, t: 2 * x * t,
        vjp=lambda x, ct: 2 * x * ct,
        input_output_aliases={0: 0},
    )
    x = jnp.arange(3.0)
    np.testing.assert_array_equal(jax.jit(jax.grad(lambda x: square(x).sum()))(x), 2 * x)
    jaxpr = _calls(jax.grad(lambda x: square(x).sum()), x)
    assert jaxpr.count("aliases={") == 1


# -- sharding ------------------------------------------------------------------


@pytest.fixture(scope="module")
def mesh():
    assert len(jax.devices()) == 4, "XLA_FLAGS must be set before jax is imported"
    return Mesh(np.array(jax.devices()), ("d",))


def test_sharded_program_without_a_rule(mesh):
    # One call on the first device, its status as one more result after the
    # function's own (_lowering/status_exchange.py): the alias still names the right result.
    x = jax.device_put(jnp.arange(8.0), NamedSharding(mesh, P("d")))
    np.testing.assert_array_equal(jax.jit(doubler())(x), 2 * np.arange(8.0))
    noop = xlabind.callback(
        xlabind.ffi_target("xlabind_noop"), lambda x: x, input_output_aliases={0: 0}
    )
    np.testing.assert_array_equal(jax.jit(noop)(x), np.arange(8.0))


def test_sharded_program_with_a_rule(mesh):
    shapes = []

    def fn(x, out):
        shapes.append(x.shape)
        out[...] = 2 * x

    op = xlabind.callback(
        fn, lambda x: x, in_place=True, sharding_rule="n -> n", input_output_aliases={0: 0}
    )
    x = jax.device_put(jnp.arange(8.0), NamedSharding(mesh, P("d")))
    np.testing.assert_array_equal(jax.jit(op)(x), 2 * np.arange(8.0))
    assert shapes == [(2,)] * 4
    noop = xlabind.callback(
        xlabind.ffi_target("xlabind_noop"),
        lambda x: x,
        sharding_rule="n -> n",
        input_output_aliases={0: 0},
    )
    np.testing.assert_array_equal(jax.jit(noop)(x), np.arange(8.0))


def test_sharded_alias_is_dropped_where_split_differently(mesh):
    # Argument and result are split along different factors: their shards
    # differ in shape, so the per-device call is not aliased.
    op = xlabind.callback(
        lambda x: np.asarray(x).T * 1,
        lambda x: x,
        sharding_rule="i j -> j i",
        input_output_aliases={0: 0},
    )
    x = jax.device_put(jnp.arange(16.0).reshape(4, 4), NamedSharding(mesh, P("d", None)))
    np.testing.assert_array_equal(jax.jit(op)(x), np.arange(16.0).reshape(4, 4).T)
