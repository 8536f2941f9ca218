"""xlabind functions inside a HiJAX primitive (jax.experimental.hijax, jax
0.12 and later): jax's newer way to give a foreign call its own vmap and
derivative rules, which jax's FFI guide now uses around ffi_call. The
primitive's lowering (`expand`) and its rules call xlabind functions; jit,
grad, vmap and vmap(grad) of the primitive run them, batched as its `batch`
rule says."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xlabind

hijax = pytest.importorskip(
    "jax.experimental.hijax", reason="HiJAX (jax.experimental.hijax) is new in jax 0.12"
)
if not hasattr(hijax, "HiPrim"):
    pytest.skip("jax.experimental.hijax has no HiPrim before jax 0.12", allow_module_level=True)

SHAPES = []  # the shape of every array the callbacks received, in order


def _recorded(fn):
    def call(x):
        SHAPES.append((fn.__name__, np.shape(x)))
        return fn(x)

    call.__name__ = fn.__name__
    return call


# The lowering's callback is batched by the primitive's `batch` rule; the
# jvp rule's by xlabind's own vmap_method (the rule runs under jax's vmap).
sine = xlabind.callback(_recorded(np.sin), lambda x: x, name="sine")
cosine = xlabind.callback(_recorded(np.cos), lambda x: x, name="cosine", vmap_method="expand_dims")


class Sine(hijax.HiPrim):
    """sin(x), any shape, lowered to an xlabind callback."""

    def __init__(self, aval):
        self.in_avals = (aval,)
        self.out_aval = aval
        self.params = {}
        super().__init__()

    def expand(self, x):
        return sine(x)

    def jvp(self, primals, tangents):
        (x,), (t,) = primals, tangents
        return Sine(jax.typeof(x))(x), cosine(x) * t

    vjp_fwd, vjp_bwd_retval = hijax.vjp_from_jvp

    def batch(self, axis_data, args, dims):
        # Elementwise: the whole batch in one call, batch axis first.
        (x,), (axis,) = args, dims
        x = jnp.moveaxis(x, axis, 0)
        return Sine(jax.typeof(x))(x), 0


def sin(x):
    return Sine(jax.typeof(x))(x)


X = jnp.linspace(0.0, 1.0, 4)
XS = jnp.stack([X, 2 * X, 3 * X])


def test_jit_runs_the_lowering_once():
    SHAPES.clear()
    np.testing.assert_allclose(jax.jit(sin)(X), np.sin(X), rtol=1e-15)
    assert SHAPES == [("sin", (4,))]


def test_grad_runs_the_jvp_rules_callbacks():
    SHAPES.clear()
    grad = jax.jit(jax.grad(lambda x: sin(x).sum()))(X)
    np.testing.assert_allclose(grad, np.cos(X), rtol=1e-15)
    assert ("cos", (4,)) in SHAPES


def test_vmap_and_vmap_of_grad_call_once_for_the_whole_batch():
    SHAPES.clear()
    np.testing.assert_allclose(jax.jit(jax.vmap(sin))(XS), np.sin(XS), rtol=1e-15)
    assert SHAPES == [("sin", (3, 4))]
    SHAPES.clear()
    grads = jax.jit(jax.vmap(jax.grad(lambda x: sin(x).sum())))(XS)
    np.testing.assert_allclose(grads, np.cos(XS), rtol=1e-15)
    assert SHAPES == [("cos", (3, 4))], SHAPES  # the primal's sin is not needed


def test_a_batch_axis_other_than_the_first_is_moved_to_the_front():
    SHAPES.clear()
    np.testing.assert_allclose(jax.vmap(sin, in_axes=1, out_axes=1)(XS.T), np.sin(XS.T), rtol=1e-15)
    assert SHAPES == [("sin", (3, 4))]
