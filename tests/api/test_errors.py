"""A Python exception inside a callback reaches the JAX caller; the process lives on."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xlabind


class CustomError(RuntimeError):
    pass


def test_exception_type_message_and_traceback_reach_the_caller():
    def fails(x):
        raise CustomError(f"bad input of shape {x.shape}")

    op = jax.jit(xlabind.callback(fails, lambda x: x))
    with pytest.raises(Exception) as info:
        op(jnp.ones((2, 3)))
    text = str(info.value)
    where = "test_exception_type_message_and_traceback_reach_the_caller.<locals>.fails"
    assert f"xlabind callback '{where}'" in text
    assert "CustomError: bad input of shape (2, 3)" in text
    assert "in fails" in text  # the traceback names the frame that raised


def test_the_next_call_works_after_an_exception():
    state = {"fail": True}

    def sometimes(x):
        if state["fail"]:
            raise ValueError("first call fails")
        return x + 1

    op = jax.jit(xlabind.callback(sometimes, lambda x: x))
    for _ in range(3):
        state["fail"] = True
        with pytest.raises(Exception, match="ValueError: first call fails"):
            op(jnp.zeros(2)).block_until_ready()
        state["fail"] = False
        np.testing.assert_array_equal(op(jnp.zeros(2)), [1.0, 1.0])


def test_keeping_a_view_after_the_call_is_refused():
    kept = []

    def leaks(x):
        kept.append(x[1:])  # a view into XLA's memory, outliving the call
        return x

    with pytest.raises(Exception, match=r"kept a reference to an operand or result array"):
        jax.jit(xlabind.callback(leaks, lambda x: x))(jnp.ones(4)).block_until_ready()


def test_keeping_a_copy_is_fine():
    kept = []

    def copies(x):
        kept.append(np.array(x))
        return x

    jax.jit(xlabind.callback(copies, lambda x: x))(jnp.arange(4.0)).block_until_ready()
    np.testing.assert_array_equal(kept[0], np.arange(4.0))


def test_errors_inside_a_larger_program():
    def fails(x):
        raise KeyError("missing")

    op = xlabind.callback(fails, lambda x: x)

    @jax.jit
    def program(x):
        return jnp.sin(op(jnp.cos(x))) * 2

    with pytest.raises(Exception, match=r"KeyError: 'missing'"):
        program(jnp.ones(3)).block_until_ready()


def test_keeping_the_out_tuple_of_an_in_place_callback_is_refused():
    kept = []

    def two_results(x, *, out):
        a, b = out
        a[...] = x
        b[...] = 2 * x
        kept.append(out)

    spec = lambda x: (x, x)
    with pytest.raises(Exception, match=r"kept a reference to an operand or result array"):
        jax.jit(xlabind.callback(two_results, spec, in_place=True))(jnp.ones(2)).block_until_ready()


def test_in_place_callbacks_get_kwargs_and_every_out_layout():
    def single(x, *, out, k):
        out[...] = x * k

    def pair(x, *, out, k):
        out[0][...] = x + k
        out[1][...] = x - k

    def nested(x, *, out, k):
        out["a"][...] = x
        out["b"][0][...] = k

    x = jnp.arange(3.0)
    np.testing.assert_allclose(
        xlabind.callback(single, lambda x, **_: x, in_place=True)(x, k=2.0), 2 * x
    )
    a, b = xlabind.callback(pair, lambda x, **_: (x, x), in_place=True)(x, k=1.0)
    np.testing.assert_allclose(a, x + 1)
    np.testing.assert_allclose(b, x - 1)

    def one_tuple(x, *, out, k):
        out[0][...] = x * k  # `out` mirrors the declared structure: a 1-tuple

    (one,) = xlabind.callback(one_tuple, lambda x, **_: (x,), in_place=True)(x, k=3.0)
    np.testing.assert_allclose(one, 3 * x)
    tree = xlabind.callback(nested, lambda x, **_: {"a": x, "b": (x,)}, in_place=True)(x, k=5.0)
    np.testing.assert_allclose(tree["a"], x)
    np.testing.assert_allclose(tree["b"][0], 5.0)


def test_jax_inside_a_callback_works():
    on_copy = xlabind.callback(lambda x: np.asarray(jax.jit(jnp.sin)(np.array(x))), lambda x: x)
    np.testing.assert_allclose(jax.jit(on_copy)(jnp.ones(3)), np.sin(np.ones(3)), rtol=1e-6)
    # jax's own tracing may leave a collectable cycle that mentions the view: that
    # is not a kept reference.
    on_view = xlabind.callback(lambda x: np.asarray(jax.jit(lambda y: y + 1)(x)), lambda x: x)
    np.testing.assert_array_equal(jax.jit(lambda x: on_view(on_view(x)))(jnp.ones(3)), 3.0)


def test_a_message_with_a_lone_surrogate_keeps_its_text_and_traceback():
    def fails(x):
        raise ValueError("bad byte \udcff in the name")

    with pytest.raises(Exception) as info:
        jax.jit(xlabind.callback(fails, lambda x: x))(jnp.ones(2)).block_until_ready()
    text = str(info.value)
    assert r"ValueError: bad byte \udcff in the name" in text
    assert "<unprintable>" not in text
    assert "in fails" in text


def test_a_negative_result_dimension_names_the_function():
    op = xlabind.callback(
        lambda x: x, lambda x: jax.ShapeDtypeStruct((2, -1), x.dtype), name="negative"
    )
    with pytest.raises(
        ValueError,
        match=r"negative: result 0 has shape \(2, -1\), with a negative "
        r"dimension",
    ):
        jax.jit(op)(jnp.ones(2))


def test_jax_export_says_why_it_cannot_serialize_a_python_function():
    op = xlabind.callback(lambda x: x, lambda x: x, name="local_fn")
    with pytest.raises(
        NotImplementedError,
        match=r"jax.export cannot serialize 'local_fn': it "
        r"calls a Python function",
    ):
        jax.export.export(jax.jit(op))(jax.ShapeDtypeStruct((2,), jnp.float32))


def test_serialize_executable_says_why_it_cannot_serialize_a_python_function():
    from jax.experimental.serialize_executable import serialize

    op = xlabind.callback(lambda x: x, lambda x: x, name="local_fn")
    compiled = jax.jit(op).lower(jnp.ones(2)).compile()
    with pytest.raises(
        TypeError,
        match=r"an executable that calls the Python function "
        r"'local_fn' cannot be serialized",
    ):
        serialize(compiled)


def test_a_call_with_the_wrong_number_of_arguments_names_the_bound_function():
    one = xlabind.callback(lambda x: x, lambda x: x, name="one")
    with pytest.raises(
        TypeError,
        match=r"one: called with 2 positional arguments, but its "
        r"result_shape_dtypes function <lambda>\(x\) cannot "
        r"take them",
    ):
        one(jnp.ones(2), jnp.ones(3))
    fixed = xlabind.callback(lambda x: x, jax.ShapeDtypeStruct((2,), jnp.float32), name="fixed")
    with pytest.raises(
        TypeError,
        match=r"fixed: called with 2 positional arguments, but its "
        r"function <lambda>\(x\) cannot take them",
    ):
        jax.jit(fixed)(jnp.ones(2), jnp.ones(3))
    with pytest.raises(
        TypeError,
        match=r"fixed: called with 1 positional argument and keyword "
        r"arguments scale, but its function <lambda>\(x\)",
    ):
        fixed(jnp.ones(2), scale=2.0)

    def writes(x, out):
        out[...] = x

    in_place = xlabind.callback(writes, lambda x, y: x, in_place=True, name="writes")
    with pytest.raises(
        TypeError,
        match=r"writes: called with 2 positional arguments, but its "
        r"function writes\(x, out\) cannot take them \(with "
        r"out, which xlabind passes\)",
    ):
        in_place(jnp.ones(2), jnp.ones(2))
    # Functions whose signature cannot be read are called as they are.
    np.testing.assert_allclose(xlabind.callback(np.sin, lambda x: x)(jnp.zeros(2)), [0.0, 0.0])
