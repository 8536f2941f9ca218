"""vmap: every method, in_axes combinations with None, nesting, and with grad."""

import cases
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xlabind

jax.config.update("jax_enable_x64", True)

METHODS = ["sequential", "expand_dims", "broadcast_all"]


def affine(method, calls=None):
    """f(x, y) = x + 2 y (linear; transpose ct -> (ct, 2 ct)); callbacks broadcast themselves."""

    def f(x, y):
        if calls is not None:
            calls.append(np.shape(x))
        return np.broadcast_to(x + 2 * y, np.broadcast_shapes(x.shape, y.shape)).copy()

    def shape(x, y):
        return jax.ShapeDtypeStruct(np.broadcast_shapes(x.shape, y.shape), x.dtype)

    return xlabind.linear(f, lambda ct: (ct, 2 * ct), shape, vmap_method=method)


def reference(x, y):
    return x + 2 * y


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (None, 0), (1, 0), (1, None)])
def test_matches_pure_jax(method, in_axes):
    op = affine(method)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(3, 4) if in_axes[0] != 1 else (4, 3)))
    y = jnp.asarray(rng.normal(size=(3, 4) if in_axes[1] == 0 else (4,)))
    if in_axes[0] is None:
        x = x[0]
    got = jax.vmap(op, in_axes=in_axes)(x, y)
    want = jax.vmap(reference, in_axes=in_axes)(x, y)
    np.testing.assert_allclose(got, want)
    np.testing.assert_allclose(jax.jit(jax.vmap(op, in_axes=in_axes))(x, y), want)


@pytest.mark.parametrize("method", METHODS)
def test_nested_vmap(method):
    op = affine(method)
    x = jnp.arange(24.0).reshape(2, 3, 4)
    y = jnp.arange(12.0).reshape(3, 4)
    f = jax.vmap(jax.vmap(op, in_axes=(0, None)), in_axes=(1, 0))
    np.testing.assert_allclose(f(x, y), jax.vmap(jax.vmap(reference, (0, None)), (1, 0))(x, y))


@pytest.mark.parametrize("method", METHODS)
def test_vmap_of_grad_and_grad_of_vmap(method):
    op = affine(method)
    x = jnp.arange(6.0).reshape(2, 3)
    y = jnp.ones(3)
    loss = lambda x, y: jnp.sum(jnp.sin(op(x, y)))
    ref = lambda x, y: jnp.sum(jnp.sin(reference(x, y)))
    for fn, rf in [
        (
            jax.vmap(jax.grad(loss, (0, 1)), in_axes=(0, None)),
            jax.vmap(jax.grad(ref, (0, 1)), in_axes=(0, None)),
        ),
        (
            jax.grad(lambda x, y: jnp.sum(jax.vmap(loss, (0, None))(x, y)), (0, 1)),
            jax.grad(lambda x, y: jnp.sum(jax.vmap(ref, (0, None))(x, y)), (0, 1)),
        ),
    ]:
        for got, want in zip(fn(x, y), rf(x, y)):
            np.testing.assert_allclose(got, want, rtol=1e-12)


def test_sequential_calls_once_per_element_and_expand_dims_once():
    calls = []
    jax.vmap(affine("sequential", calls), in_axes=(0, None))(jnp.ones((5, 2)), jnp.ones(2))
    assert calls == [(2,)] * 5
    calls.clear()
    jax.vmap(
        xlabind.callback(
            lambda x, y: calls.append(x.shape) or x + y, lambda x, y: x, vmap_method="expand_dims"
        ),
        in_axes=(0, None),
    )(jnp.ones((5, 2)), jnp.ones(2))
    assert calls == [(5, 2)]


def native_scale(calls):
    """x -> 3 x with native batching: the callback sees the whole batch."""

    def f(x, *, batch_axes):
        calls.append((x.shape, batch_axes))
        return 3 * x

    def shape(x, *, batch_axes):
        if batch_axes:
            return xlabind.BatchedResult(x.shape, x.dtype, batch_axes[0][-1])
        return jax.ShapeDtypeStruct(x.shape, x.dtype)

    return xlabind.linear(
        f,
        lambda ct, *, batch_axes: 3 * ct,
        shape,
        transpose_shape_dtypes=shape,
        vmap_method="native",
    )


def test_native_batching_reports_batch_axes_and_nests():
    calls = []
    op = native_scale(calls)
    x = jnp.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_allclose(jax.vmap(op, in_axes=1)(x), 3 * jnp.moveaxis(x, 1, 0))
    assert calls[-1] == ((2, 3, 4), ((1,),))
    np.testing.assert_allclose(
        jax.vmap(jax.vmap(op, in_axes=1), in_axes=2)(x), 3 * jnp.transpose(x, (2, 1, 0))
    )
    # Inner vmap over axis 1 of the (2, 3) slices = axis 1 of x; outer over axis 2.
    assert calls[-1] == ((2, 3, 4), ((1, 2),))


def test_native_batching_with_grad_both_ways():
    calls = []
    op = native_scale(calls)
    x = jnp.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(jax.vmap(jax.grad(lambda v: jnp.sum(op(v) ** 2)))(x), 18 * x)
    np.testing.assert_allclose(jax.grad(lambda x: jnp.sum(jax.vmap(op)(x) ** 2))(x), 18 * x)
    assert any(batch_axes == ((0,),) for _, batch_axes in calls)


def test_native_batching_needs_batched_results():
    op = xlabind.callback(
        lambda x, *, batch_axes: x, lambda x, *, batch_axes: x, vmap_method="native", name="nb"
    )
    with pytest.raises(
        TypeError,
        match=r"nb: under vmap .* batch_axis=None; vmap_method='native' "
        r"needs every result's batch axis",
    ):
        jax.vmap(op)(jnp.ones((2, 3)))


def test_unknown_vmap_method():
    with pytest.raises(ValueError, match=r"vmap_method must be one of"):
        xlabind.callback(lambda x: x, lambda x: x, vmap_method="parallel")


@pytest.mark.parametrize("method", METHODS + ["native"])
def test_what_derivative_functions_see_under_jacfwd_and_jacrev(method):
    """The contract docs/semantics.md states for derivative functions
    (Python or native targets alike): a JVP sees each primal laid out like its
    tangent under every method; under expand_dims a VJP's primal that the vmap
    does not batch has a size-1 leading axis beside the batched cotangent."""
    seen = {"jvp": [], "vjp": []}

    def record(kind):
        def rule(x, t, **kwargs):
            seen[kind].append((np.shape(x), np.shape(t)))
            return 2 * x * t  # broadcasts x where it has size 1

        return rule

    def like(i):
        def shape(*args, batch_axes=None):
            if batch_axes is None:
                return jax.ShapeDtypeStruct(args[i].shape, args[i].dtype)
            return xlabind.BatchedResult(args[i].shape, args[i].dtype, batch_axis=batch_axes[i][-1])

        return shape

    square = xlabind.nonlinear(
        lambda x, **_: x * x,
        like(0),
        jvp=record("jvp"),
        vjp=record("vjp"),
        vjp_shape_dtypes=like(1),
        vmap_method=method,
    )
    x = jnp.arange(1.0, 4.0)
    for jacobian in (jax.jacfwd, jax.jacrev):
        np.testing.assert_allclose(jacobian(square)(x), np.diag(2 * np.arange(1.0, 4.0)))
    if method == "sequential":
        assert set(seen["jvp"]) == set(seen["vjp"]) == {((3,), (3,))}
    elif method == "expand_dims":
        assert seen["jvp"] == [((3, 3), (3, 3))] and seen["vjp"] == [((1, 3), (3, 3))]
    else:  # broadcast_all, and native (the primal aligned, or broadcast by the rule)
        assert seen["jvp"] == [((3, 3), (3, 3))], seen
        assert all(t == (3, 3) for _, t in seen["vjp"]), seen


def broadcast_product(kind, seen):
    """x * w (multilinear) or sin(x * w) (nonlinear), bound with
    vmap_method="expand_dims", whose derivative functions return every result
    with all the leading axes their operands broadcast to: the contract
    docs/semantics.md states, under which an argument the vmap does not batch
    (size 1 in front) gets a cotangent with the batch in front."""

    def batch_of(*arrays):
        return np.broadcast_shapes(*(np.shape(a) for a in arrays))

    def cotangent(value, *arrays):
        seen.append(tuple(np.shape(a) for a in arrays))
        return np.broadcast_to(value, batch_of(*arrays)).copy()

    def shape(x, w):
        return jax.ShapeDtypeStruct(batch_of(x, w), x.dtype)

    if kind == "multilinear":
        return xlabind.multilinear(
            lambda x, w: x * w,
            [lambda w, ct: cotangent(w * ct, w, ct), lambda x, ct: cotangent(x * ct, x, ct)],
            shape,
            vmap_method="expand_dims",
        )

    def vjp(x, w, ct):
        g = np.cos(x * w) * ct
        return cotangent(g * w, x, w, ct), cotangent(g * x, x, w, ct)

    return xlabind.nonlinear(
        lambda x, w: np.sin(x * w),
        shape,
        jvp=lambda x, w, tx, tw: np.cos(x * w) * (tx * w + x * tw),
        vjp=vjp,
        vmap_method="expand_dims",
    )


def reference_product(kind):
    return (lambda x, w: x * w) if kind == "multilinear" else (lambda x, w: jnp.sin(x * w))


def loss_of(f):
    return lambda x, w: jnp.sum(jnp.cos(f(x, w)))


# Per composition: (x, w, in_axes) -> the function of f to compare; x and w are
# batched (first axis) or not as in_axes says.
COMPOSITIONS = {
    "grad_of_vmap": lambda f, in_axes: jax.grad(
        lambda x, w: jnp.sum(jax.vmap(loss_of(f), in_axes)(x, w)), (0, 1)
    ),
    "vmap_of_grad": lambda f, in_axes: jax.vmap(jax.grad(loss_of(f), (0, 1)), in_axes),
    "jit_grad_of_vmap": lambda f, in_axes: jax.jit(COMPOSITIONS["grad_of_vmap"](f, in_axes)),
    "jacrev_of_vmap": lambda f, in_axes: jax.jacrev(jax.vmap(f, in_axes), (0, 1)),
    "jacfwd_of_vmap": lambda f, in_axes: jax.jacfwd(jax.vmap(f, in_axes), (0, 1)),
    "vmap_of_jacrev": lambda f, in_axes: jax.vmap(jax.jacrev(f, (0, 1)), in_axes),
    "vmap_of_jacfwd": lambda f, in_axes: jax.vmap(jax.jacfwd(f, (0, 1)), in_axes),
    # The other argument batched by a second vmap, outside or inside the derivative.
    "vmap_of_vmap_of_grad": lambda f, in_axes: jax.vmap(
        jax.vmap(jax.grad(loss_of(f), (0, 1)), in_axes), in_axes[::-1]
    ),
    "grad_of_vmap_of_vmap": lambda f, in_axes: jax.grad(
        lambda x, w: jnp.sum(jax.vmap(jax.vmap(loss_of(f), in_axes), in_axes[::-1])(x, w)),
        (0, 1),
    ),
    "vmap_of_grad_of_vmap": lambda f, in_axes: jax.vmap(
        jax.grad(lambda x, w: jnp.sum(jax.vmap(loss_of(f), in_axes)(x, w)), (0, 1)),
        in_axes[::-1],
    ),
}


@pytest.mark.parametrize(
    "unbatched, composition, kind",
    cases.product(
        "expand_dims", ["x", "w"], sorted(COMPOSITIONS), ["nonlinear", "multilinear"], sampled=12
    ),
)
def test_expand_dims_derivatives_of_an_unbatched_argument(kind, composition, unbatched):
    """Issue 72, item 14: one derivative function serves jax.grad of jax.vmap
    and jax.vmap of jax.grad, though the vmap leaves one argument unbatched."""
    seen = []
    op = broadcast_product(kind, seen)
    in_axes = (0, None) if unbatched == "w" else (None, 0)
    rng = np.random.default_rng(3)
    batched, single = rng.normal(size=(4, 3)), rng.normal(size=3)
    if composition.count("vmap") == 2:
        single = rng.normal(size=(2, 3))  # batched by the second vmap
    x, w = (batched, single) if unbatched == "w" else (single, batched)
    x, w = jnp.asarray(x), jnp.asarray(w)
    transform = COMPOSITIONS[composition]
    got = transform(op, in_axes)(x, w)
    want = transform(reference_product(kind), in_axes)(x, w)
    for g, r in zip(got, want):
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-12)
    if "jacfwd" not in composition:
        assert seen, "the derivative function was not called"


def test_an_expand_dims_vjp_sees_and_returns_the_same_shapes_inside_and_outside_grad():
    """The VJP is called as if jax.vmap had batched it by its own method: the
    unbatched w with a size-1 axis in front, and its cotangent returned with
    the batch (xlabind sums it where jax.grad is outside the vmap)."""
    seen = []
    op = broadcast_product("nonlinear", seen)
    x, w = jnp.arange(12.0).reshape(4, 3) / 12, jnp.array([0.5, 1.0, 1.5])
    for composition in ("grad_of_vmap", "vmap_of_grad"):
        seen.clear()
        grads = COMPOSITIONS[composition](op, (0, None))(x, w)
        assert seen == [((4, 3), (1, 3), (4, 3))] * 2, composition  # one per cotangent
        assert [g.shape for g in grads] == [
            (4, 3),
            (3,) if composition == "grad_of_vmap" else (4, 3),
        ]


def test_an_expand_dims_jvp_sees_the_same_shapes_inside_and_outside_jvp():
    """As the VJP does: the tangent of the unbatched w has the batch in front
    under jax.jvp of jax.vmap too, as under jax.vmap of jax.jvp."""
    seen = []

    def jvp(x, w, tx, tw):
        seen.append((x.shape, w.shape, tx.shape, tw.shape))
        return np.cos(x * w) * (tx * w + x * tw)

    op = xlabind.nonlinear(
        lambda x, w: np.sin(x * w), lambda x, w: x, jvp=jvp, vmap_method="expand_dims"
    )
    x, w = jnp.arange(12.0).reshape(4, 3) / 12, jnp.array([0.5, 1.0, 1.5])
    tx, tw = jnp.ones((4, 3)), jnp.array([1.0, -1.0, 2.0])
    _, outside = jax.jvp(jax.vmap(op, (0, None)), (x, w), (tx, tw))
    _, inside = jax.vmap(lambda *a: jax.jvp(op, a[:2], a[2:]), (0, None, 0, None))(x, w, tx, tw)
    _, want = jax.jvp(jax.vmap(lambda x, w: jnp.sin(x * w), (0, None)), (x, w), (tx, tw))
    np.testing.assert_allclose(outside, want, rtol=1e-12)
    np.testing.assert_allclose(inside, want, rtol=1e-12)
    assert seen == [((4, 3), (1, 3), (4, 3), (4, 3))] * 2
