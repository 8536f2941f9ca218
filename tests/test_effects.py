"""effect="unordered" / "ordered": calls that run although their results are
unused, and (ordered) in program order; refused under vmap (ordered), AD and
sharding rules (ordered), with errors that name the function."""

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_force_host_platform_device_count=4")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

import xlabind  # noqa: E402


def logger(seen, tag, effect, **options):
    def fn(x):
        seen.append(tag)
        return x

    return xlabind.callback(fn, lambda x: x, effect=effect, name=f"log_{tag}", **options)


@pytest.mark.parametrize("effect", ["unordered", "ordered"])
def test_unused_results_still_run_once_per_execution(effect):
    seen = []
    log = logger(seen, "a", effect)
    f = jax.jit(lambda x: (log(x), x + 1)[1])
    np.testing.assert_array_equal(f(jnp.ones(2)), [2.0, 2.0])
    assert seen == ["a"]
    f(jnp.ones(2))
    assert seen == ["a", "a"]


def test_without_an_effect_unused_results_are_removed():
    seen = []
    log = logger(seen, "a", None)
    jax.jit(lambda x: (log(x), x + 1)[1])(jnp.ones(2))
    assert seen == []


def test_lowered_with_has_side_effect():
    for effect, expected in ((None, False), ("unordered", True), ("ordered", True)):
        text = jax.jit(logger([], "a", effect)).lower(jnp.ones(2)).as_text()
        assert ("has_side_effect = true" in text) == expected, effect
    noop = xlabind.callback(xlabind.ffi_target("xlabind_noop"), lambda x: x, effect="unordered")
    assert "has_side_effect = true" in jax.jit(noop).lower(jnp.ones(2)).as_text()


def test_native_target_with_an_effect_runs_with_its_result_unused():
    noop = xlabind.callback(xlabind.ffi_target("xlabind_noop"), lambda x: x, effect="ordered")
    np.testing.assert_array_equal(jax.jit(lambda x: (noop(x), x * 2)[1])(jnp.ones(2)), [2, 2])


def test_ordered_calls_run_in_program_order():
    seen = []
    a, b, c = (logger(seen, tag, "ordered") for tag in "abc")
    # No data dependence between the calls: only the effect orders them.
    f = jax.jit(lambda x: (c(x), b(x * 2), a(x + 1), c(x - 1), x)[-1])
    for _ in range(3):
        f(jnp.ones(3))
    assert seen == ["c", "b", "a", "c"] * 3
    # Across separate jitted functions, and eager calls, too.
    seen.clear()
    g = jax.jit(lambda x: (a(x), x)[1])
    h = jax.jit(lambda x: (b(x), x)[1])
    g(jnp.ones(2)), h(jnp.ones(2)), c(jnp.ones(2)), g(jnp.ones(2))
    jax.effects_barrier()
    assert seen == ["a", "b", "c", "a"]


def test_ordered_inside_control_flow():
    seen = []
    a, b = (logger(seen, tag, "ordered") for tag in "ab")

    def body(carry, _):
        return (a(carry), b(carry))[1] + 1, None

    carry, _ = jax.jit(lambda x: jax.lax.scan(body, x, None, length=3))(jnp.zeros(2))
    np.testing.assert_array_equal(carry, [3.0, 3.0])
    assert seen == ["a", "b"] * 3


def test_eager_calls_run():
    seen = []
    logger(seen, "a", "unordered")(jnp.ones(2))
    logger(seen, "b", "ordered")(jnp.ones(2))
    jax.effects_barrier()
    assert seen == ["a", "b"]


def test_unordered_without_results_runs():
    seen = []
    note = xlabind.callback(lambda x: seen.append(float(x.sum())), (), effect="unordered")
    jax.jit(lambda x: (note(x), x)[1])(jnp.ones(3))
    assert seen == [3.0]


def test_ordered_needs_an_argument_and_a_result():
    note = xlabind.callback(lambda x: None, (), effect="ordered", name="note")
    with pytest.raises(ValueError, match=r"note: effect='ordered' needs a call with at least one "
                                         r"argument and one result \(it has 1 and 0\)"):
        jax.jit(note)(jnp.ones(2))


def test_bad_effect():
    with pytest.raises(ValueError, match=r"my_op: effect must be one of \(None, 'unordered', "
                                         r"'ordered'\), got 'always'"):
        xlabind.callback(np.negative, lambda x: x, effect="always", name="my_op")
    assert xlabind.EFFECTS == (None, "unordered", "ordered")
    assert xlabind.callback(np.negative, lambda x: x, effect="ordered").effect == "ordered"


# -- vmap ----------------------------------------------------------------------

@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all"])
def test_unordered_under_vmap(method):
    seen = []
    log = logger(seen, "a", "unordered", vmap_method=method)
    xs = jnp.arange(6.0).reshape(3, 2)
    jax.jit(jax.vmap(lambda x: (log(x), x + 1)[1]))(xs)
    assert seen == ["a"] * (3 if method == "sequential" else 1)


def test_ordered_refuses_vmap():
    log = logger([], "a", "ordered", vmap_method="expand_dims")
    with pytest.raises(ValueError, match="log_a has effect='ordered', so it cannot be batched "
                                         "with jax.vmap"):
        jax.vmap(log)(jnp.ones((3, 2)))


# -- derivatives ---------------------------------------------------------------

@pytest.mark.parametrize("effect", ["unordered", "ordered"])
def test_derivatives_are_refused(effect):
    seen = []
    scale = xlabind.linear(lambda x: (seen.append("f"), 2 * x)[1], lambda ct: 2 * ct,
                           lambda x: x, effect=effect, name="scale")
    with pytest.raises(TypeError, match=f"scale has effect='{effect}', so it cannot be "
                                        f"differentiated: its derivatives would run the effect "
                                        f"again"):
        jax.grad(lambda x: scale(x).sum())(jnp.ones(2))
    with pytest.raises(TypeError, match="scale has effect=.*cannot be differentiated"):
        jax.jvp(scale, (jnp.ones(2),), (jnp.ones(2),))
    with pytest.raises(TypeError, match="scale has effect=.*cannot be transposed"):
        jax.linear_transpose(scale, jnp.ones(2))(jnp.ones(2))
    square = xlabind.nonlinear(lambda x: x * x, lambda x: x, jvp=lambda x, t: 2 * x * t,
                               effect=effect, name="square")
    with pytest.raises(TypeError, match="square has effect=.*cannot be differentiated"):
        jax.jacfwd(square)(jnp.ones(2))


def test_effectful_call_with_no_tangent_under_grad():
    # Its argument does not depend on what is differentiated: no derivative
    # of it is needed, so the call runs, once.
    seen = []
    log = logger(seen, "a", "unordered")
    grad = jax.grad(lambda x, y: (x * log(y)).sum())(jnp.ones(2), jnp.full(2, 3.0))
    np.testing.assert_array_equal(grad, [3.0, 3.0])
    assert seen == ["a"]


# -- sharding ------------------------------------------------------------------

@pytest.fixture(scope="module")
def mesh():
    assert len(jax.devices()) == 4, "XLA_FLAGS must be set before jax is imported"
    return Mesh(np.array(jax.devices()), ("d",))


def test_ordered_refuses_a_sharding_rule():
    with pytest.raises(ValueError, match="log_a: effect='ordered' cannot have a sharding_rule"):
        logger([], "a", "ordered", sharding_rule="n -> n")


def test_unordered_with_a_sharding_rule_runs_once_per_device(mesh):
    seen = []
    log = logger(seen, "a", "unordered", sharding_rule="n -> n")
    x = jax.device_put(jnp.arange(8.0), NamedSharding(mesh, P("d")))
    jax.block_until_ready(jax.jit(lambda x: (log(x), x + 1)[1])(x))
    jax.effects_barrier()  # every device's program has run
    assert seen == ["a"] * 4
    # Its result unused in a program without a rule: once, on the first device.
    seen.clear()
    unruled = logger(seen, "b", "unordered")
    jax.block_until_ready(jax.jit(lambda x: (unruled(x), x + 1)[1])(x))
    jax.effects_barrier()
    assert seen == ["b"]


def test_unordered_without_a_rule_in_a_sharded_program(mesh):
    seen = []
    log = logger(seen, "a", "unordered")
    x = jax.device_put(jnp.arange(8.0), NamedSharding(mesh, P("d")))
    y = jax.jit(lambda x: log(x) * 2)(x)
    np.testing.assert_array_equal(y, 2 * np.arange(8.0))
    assert seen == ["a"]
