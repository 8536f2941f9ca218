"""Python functions in TPU programs: every constructor, the jaxbind drop-in,
derivatives, vmap, effects, exceptions, in-place results; native targets
refused by name. tools/device_check.py runs this file on a TPU chip. Off a TPU
the TPU lowering rule stands in for the CPU one (jax lowers the same host
callback there), so CI runs the TPU path's Python half with the same
assertions; what only a chip shows is marked `chip_only`.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tpu_lowering import chip_only, tpu_rule_for_cpu_programs

import xlabind
from xlabind import jaxbind


@pytest.fixture(autouse=True, scope="module")
def tpu_rule():
    with tpu_rule_for_cpu_programs():
        yield


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def softplus_op():
    return xlabind.nonlinear(
        lambda x: np.logaddexp(0, x),
        lambda x: x,
        jvp=lambda x, t: sigmoid(x) * t,
        vjp=lambda x, ct: sigmoid(x) * ct,
    )


def test_readme_example_runs_jitted_eager_differentiated_and_vmapped():
    # The references are NumPy's: the function runs in NumPy on the host,
    # while jax.nn on a TPU approximates its transcendentals.
    softplus = softplus_op()
    x = jnp.linspace(-3.0, 3.0, 7)
    host = np.asarray(x)
    np.testing.assert_allclose(jax.jit(softplus)(x), np.logaddexp(0, host), rtol=1e-6)
    np.testing.assert_allclose(softplus(x), np.logaddexp(0, host), rtol=1e-6)
    np.testing.assert_allclose(jax.grad(lambda x: softplus(x).sum())(x), sigmoid(host), rtol=1e-6)
    np.testing.assert_allclose(
        jax.jit(jax.jvp, static_argnums=0)(softplus, (x,), (jnp.ones_like(x),))[1],
        sigmoid(host),
        rtol=1e-6,
    )
    batch = np.stack([host, -host])
    np.testing.assert_allclose(jax.vmap(softplus)(batch), np.logaddexp(0, batch), rtol=1e-6)
    assert jax.jit(softplus)(x).devices().pop().platform == jax.default_backend()


def test_callback_with_static_kwargs_and_a_result_tree():
    def stats(x, *, scale):
        return {"mean": np.float32(x.mean() * scale), "max": np.float32(x.max())}

    scalar = jax.ShapeDtypeStruct((), jnp.float32)
    op = xlabind.callback(stats, {"mean": scalar, "max": scalar})
    out = jax.jit(lambda x: op(x, scale=2.0))(jnp.arange(4.0))
    assert float(out["mean"]) == 3.0 and float(out["max"]) == 3.0


@pytest.mark.parametrize("vmap_method", ["sequential", "expand_dims", "broadcast_all"])
def test_callback_vmap_methods(vmap_method):
    op = xlabind.callback(lambda x: x * 2, lambda x: x, vmap_method=vmap_method)
    x = jnp.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(jax.jit(jax.vmap(op))(x), 2 * x)


def test_linear_gives_every_derivative_and_the_transpose():
    a = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 3.0]], np.float32)
    matvec = xlabind.linear(
        lambda x: a @ x, lambda ct: a.T @ ct, lambda x: jax.ShapeDtypeStruct((2,), x.dtype)
    )
    x = jnp.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(jax.jit(matvec)(x), a @ np.asarray(x))
    grad = jax.grad(lambda x: jnp.sum(matvec(x) ** 2))(x)
    np.testing.assert_allclose(grad, 2 * a.T @ (a @ np.asarray(x)), rtol=1e-6)
    (transposed,) = jax.linear_transpose(matvec, x)(jnp.ones(2))
    np.testing.assert_allclose(transposed, a.T @ np.ones(2))
    hessian = jax.hessian(lambda x: jnp.sum(matvec(x) ** 2))(x)
    np.testing.assert_allclose(hessian, 2 * a.T @ a, rtol=1e-6)


def test_multilinear_product_rule():
    mul = xlabind.multilinear(
        lambda x, y: x * y, (lambda y, ct: y * ct, lambda x, ct: x * ct), lambda x, y: x
    )
    x, y = jnp.array([1.0, 2.0, 3.0]), jnp.array([4.0, 5.0, 6.0])
    gx, gy = jax.jit(jax.grad(lambda x, y: mul(x, y).sum(), argnums=(0, 1)))(x, y)
    np.testing.assert_allclose(gx, y)
    np.testing.assert_allclose(gy, x)


def test_in_place_function_writes_host_results_and_an_unwritten_one_is_refused():
    def double(x, out):
        out[...] = 2 * x

    op = xlabind.callback(double, lambda x: x, in_place=True)
    np.testing.assert_array_equal(jax.jit(op)(jnp.arange(3.0)), [0.0, 2.0, 4.0])

    def lazy(x, out):
        pass

    with pytest.raises(Exception, match=r"lazy.*wrote nothing into `out`"):
        jax.block_until_ready(
            jax.jit(xlabind.callback(lazy, lambda x: x, in_place=True))(jnp.arange(3.0))
        )


def test_jaxbind_drop_in_with_first_derivatives():
    def f(out, args, kwargs_dump):
        out[0][...] = args[0] ** 2

    def f_jvp(out, args, kwargs_dump):
        x, dx = args
        out[0][...] = 2 * x * dx

    def f_vjp(out, args, kwargs_dump):
        x, ct = args
        out[0][...] = 2 * x * ct

    def shapes(*args, **kwargs):
        return ((args[0].shape, args[0].dtype),)

    op = jaxbind.get_nonlinear_call(f, (f_jvp, f_vjp), shapes, shapes)
    x = jnp.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(jax.jit(op)(x)[0], x**2)
    np.testing.assert_allclose(jax.grad(lambda x: op(x)[0].sum())(x), 2 * x)


def test_an_exception_names_the_function_and_the_chip_runs_the_next_call():
    def broken(x):
        raise ValueError("bad value in broken")

    op = xlabind.callback(broken, lambda x: x)
    with pytest.raises(
        Exception, match=r"xlabind callback '[^']*broken' raised ValueError: bad value"
    ):
        jax.block_until_ready(jax.jit(op)(jnp.ones(3)))
    np.testing.assert_allclose(jax.jit(softplus_op())(jnp.zeros(2)), np.log(2.0) * np.ones(2))


def test_a_wrong_result_shape_names_the_function():
    op = xlabind.callback(lambda x: np.zeros(5, np.float32), lambda x: x, name="misshapen")
    with pytest.raises(Exception, match=r"misshapen: result 0 has shape \(5,\)"):
        jax.block_until_ready(jax.jit(op)(jnp.ones(3)))


def test_ordered_effect_keeps_call_order_in_a_scan():
    seen = []

    def record(x):
        seen.append(float(x))
        return x

    op = xlabind.callback(record, lambda x: x, effect="ordered")

    def step(carry, x):
        return carry + op(x), None

    total, _ = jax.jit(lambda xs: jax.lax.scan(step, 0.0, xs))(jnp.arange(5.0))
    jax.effects_barrier()
    assert float(total) == 10.0
    assert seen == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_unordered_effect_runs_even_when_its_result_is_unused():
    seen = []

    def record(x):
        seen.append(1)
        return x

    op = xlabind.callback(record, lambda x: x, effect="unordered")

    @jax.jit
    def f(x):
        op(x)
        return x + 1

    jax.block_until_ready(f(jnp.ones(2)))
    jax.effects_barrier()
    assert seen == [1]


def test_jax_inside_the_function_runs_on_the_host_not_the_chip():
    def uses_jax(x):
        return np.asarray(jnp.sin(jnp.asarray(x)))

    op = xlabind.callback(uses_jax, lambda x: x)
    x = jnp.linspace(0.0, 1.0, 5)
    np.testing.assert_allclose(jax.jit(op)(x), np.sin(np.asarray(x)), rtol=1e-6)


def test_a_native_target_is_refused_naming_it():
    op = xlabind.callback(xlabind.ffi_target("xlabind_noop"), lambda x: x, name="noop")
    with pytest.raises(NotImplementedError, match=r"'xlabind_noop'.*TPUs run no native FFI"):
        jax.jit(op)(jnp.ones(3))
    with pytest.raises(NotImplementedError, match=r"TPUs run no native FFI"):
        xlabind.callback(xlabind.ffi_target("mine", platforms="tpu"), lambda x: x)(jnp.ones(3))


def test_export_is_refused_clearly():
    op = xlabind.callback(lambda x: x, lambda x: x, name="local_fn")
    with pytest.raises(NotImplementedError, match=r"jax.export cannot serialize 'local_fn'"):
        jax.export.export(jax.jit(op))(jnp.ones(3))


@chip_only
def test_python_m_xlabind_reports_the_tpu():
    from xlabind import __main__ as command

    lines, _ = command.report()
    (tpu,) = [line for line in lines if line.startswith("TPU (")]
    assert "Python functions run on the host" in tpu
    assert "native FFI targets cannot run" in tpu


def test_a_native_target_with_a_tpu_formulation_lowers_as_it():
    def doubled(x, *, result_avals, scale):
        assert [a.shape for a in result_avals] == [x.shape]
        return [x * scale]

    target = xlabind.ffi_target("xlabind_noop", tpu_formulation=doubled)
    op = xlabind.linear(target, target, lambda x, **_: x, name="scaled")
    x = jnp.arange(3.0)
    np.testing.assert_allclose(jax.jit(lambda x: op(x, scale=2.0))(x), 2 * x)
    with pytest.raises(TypeError, match=r"tpu_formulation must be callable"):
        xlabind.ffi_target("xlabind_noop", tpu_formulation=1)


def test_registering_handlers_for_tpus_is_refused():
    with pytest.raises(ValueError, match=r"platform 'tpu' runs no native FFI handlers"):
        xlabind.register_ffi_targets({"tpu": {}})
