"""vmap_method="native": batch axes that name their vmap level, and batched
result shapes that are checked against the unbatched ones."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from layouts import elementwise, elementwise_shape

import xlabind
from xlabind import jaxbind

jax.config.update("jax_enable_x64", True)


def test_nested_vmap_over_different_arguments_is_not_one_vmap_over_both():
    seen = []

    def add(a, b, *, batch_axes=None):
        seen.append(batch_axes)
        return elementwise(np.add)(a, b, batch_axes=batch_axes)

    op = xlabind.callback(add, elementwise_shape, vmap_method="native")
    A = jnp.arange(12.0).reshape(3, 4)
    B = 100 * jnp.arange(1.0, 13.0).reshape(3, 4)
    got = jax.vmap(jax.vmap(op, in_axes=(0, None)), in_axes=(None, 0))(A, B)
    want = jax.vmap(jax.vmap(jnp.add, in_axes=(0, None)), in_axes=(None, 0))(A, B)
    assert got.shape == (3, 3, 4)
    np.testing.assert_array_equal(got, want)
    # Inner level: A batched on axis 0, B not; outer level: B on axis 0, A not.
    assert seen[-1] == ((0, None), (None, 0))
    # One vmap over both is a different thing, and looks different.
    np.testing.assert_array_equal(jax.vmap(op)(A, B), A + B)
    assert seen[-1] == ((0,), (0,))


def test_batch_axes_name_levels_innermost_first():
    seen = []

    def f(x, *, batch_axes=None):
        seen.append(batch_axes)
        return elementwise(np.negative)(x, batch_axes=batch_axes)

    op = xlabind.callback(f, elementwise_shape, vmap_method="native")
    x = jnp.arange(24.0).reshape(2, 3, 4)
    got = jax.vmap(jax.vmap(op, in_axes=1), in_axes=2)(x)
    np.testing.assert_array_equal(got, -jnp.transpose(x, (2, 1, 0)))
    # The inner vmap took axis 1 of the (2, 3) slices, i.e. axis 1 of x; the outer axis 2.
    assert seen[-1] == ((1, 2),)


def bad_shape_op(shape_fn, name="checked"):
    return xlabind.callback(
        lambda x, *, batch_axes=None: x, shape_fn, vmap_method="native", name=name
    )


def test_batched_result_must_be_a_batch_of_the_unbatched_result():
    op = bad_shape_op(
        lambda x, *, batch_axes=None: (
            x if batch_axes is None else xlabind.BatchedResult((x.shape[0], 7), x.dtype, 0)
        )
    )
    with pytest.raises(
        ValueError,
        match=r"checked: under vmap .* result 0 shape \(5, 7\) .*"
        r"batch_axis=0; expected a batch of 5 along that axis "
        r"of the unbatched result, which has shape \(3,\)",
    ):
        jax.vmap(op)(jnp.ones((5, 3)))


def test_batched_result_axis_must_have_the_batch_size():
    op = bad_shape_op(
        lambda x, *, batch_axes=None: (
            x if batch_axes is None else xlabind.BatchedResult((3, 5), x.dtype, 0)
        )
    )
    with pytest.raises(ValueError, match=r"shape \(3, 5\) .*batch_axis=0; expected a batch of 5"):
        jax.vmap(op)(jnp.ones((5, 3)))


@pytest.mark.parametrize("axis", [2, -3, 7])
def test_out_of_range_batch_axis_is_a_clear_error(axis):
    op = bad_shape_op(
        lambda x, *, batch_axes=None: (
            x if batch_axes is None else xlabind.BatchedResult(x.shape, x.dtype, axis)
        )
    )
    with pytest.raises(
        ValueError,
        match=rf"checked: .* batch_axis={axis}, which is out of range "
        r"for 2 dimensions",
    ):
        jax.vmap(op)(jnp.ones((5, 3)))


def test_a_negative_batch_axis_counts_from_the_end():
    op = bad_shape_op(
        lambda x, *, batch_axes=None: (
            x if batch_axes is None else xlabind.BatchedResult(x.shape, x.dtype, -1)
        )
    )
    x = jnp.arange(15.0).reshape(3, 5)
    np.testing.assert_array_equal(jax.vmap(op, in_axes=1, out_axes=1)(x), x)


def test_jaxbind_keeps_its_own_batch_axes_and_checks_results():
    seen = []

    def f(out, args, kwargs_dump):
        seen.append(jaxbind.load_kwargs(kwargs_dump)["batch_axes"])
        a, b = args
        out[0][()] = a + b if a.shape == b.shape else a[:, None] + b[None]

    def abstract(a, b, *, batch_axes=None):
        seen.append(("abstract", batch_axes))
        if batch_axes is None:
            return ((a.shape, a.dtype),)
        return ((a.shape, a.dtype, 0),)  # jaxbind users assume the leading axis...

    op = jaxbind.get_linear_call(f, None, abstract, None, func_can_batch=True)
    A = jnp.arange(12.0).reshape(3, 4)
    # jaxbind's own semantics: per argument, the axes of the levels that batch it.
    (one,) = jax.vmap(op)(A, A)
    np.testing.assert_array_equal(one, 2 * A)
    assert seen[-1] == ((0,), (0,))
    # ...and where that leaves the shape ambiguous, xlabind now says so instead of
    # returning a (3, 4) array where (3, 3, 4) belongs.
    with pytest.raises(
        ValueError,
        match=r"result 0 shape \(3, 4\) .*batch_axis=0; expected a "
        r"batch of 3 .* unbatched result, which has shape \(3, 4\)",
    ):
        jax.vmap(jax.vmap(op, in_axes=(0, None)), in_axes=(None, 0))(A, A)
    assert ("abstract", ((0,), (0,))) in seen
