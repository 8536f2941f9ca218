"""xlabind demo: SciPy's gammaln inside jax.jit, jax.vmap and jax.grad, timed
against jax.pure_callback doing the same work.

    tools/bazel run //examples/python_ops:demo
"""

import time

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special

import xlabind
from python_ops.scipy_gammaln import (
    gammaln,
)  # xlabind.nonlinear, derivatives to order 2

jax.config.update("jax_enable_x64", True)


def median_ms(f, *args, repeats=30):
    f(*args).block_until_ready()  # compile and warm up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f(*args).block_until_ready()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


x = jnp.linspace(0.5, 6.0, 1_000_000)

# 1. jit: a JAX program around a SciPy function XLA cannot see.
loss = jax.jit(lambda x: jnp.sum(gammaln(x) ** 2))
value, expected = (
    float(loss(x)),
    float(np.sum(scipy.special.gammaln(np.asarray(x)) ** 2)),
)
print(f"jit     sum(gammaln(x)^2)      = {value:.6f}  (NumPy: {expected:.6f})")

# 2. grad: reverse mode calls the bound vjp (digamma) once.
grad = jax.jit(jax.grad(lambda x: jnp.sum(gammaln(x) ** 2)))
g = grad(x)
g_ref = 2 * scipy.special.gammaln(np.asarray(x)) * scipy.special.digamma(np.asarray(x))
print(f"grad    max |error| vs SciPy     = {float(jnp.max(jnp.abs(g - g_ref))):.2e}")

# 3. hessian: the derivative functions are bound functions with derivatives.
points = jnp.array([0.5, 1.0, 2.0, 4.0])
h = jax.hessian(lambda x: jnp.sum(gammaln(x)))(points)
print(
    f"hessian diagonal                 = {np.round(np.diag(h), 4)} "
    f"(polygamma(1, x): {np.round(scipy.special.polygamma(1, np.asarray(points)), 4)})"
)

# 4. vmap: a batch of 8 rows, one call per row (vmap_method="sequential").
rows = x[:8_000].reshape(8, 1000)
batched = jax.jit(jax.vmap(lambda r: jnp.sum(gammaln(r))))(rows)
print(f"vmap    8 row sums               = {np.round(batched[:3], 3)} ...")

# 5. Errors in the callback reach the caller; the process lives on.
picky = xlabind.callback(lambda x: scipy.special.gammaln(x, out=x), lambda x: x)
try:
    jax.jit(picky)(x[:3]).block_until_ready()
except Exception as e:  # jax raises JaxRuntimeError carrying the Python error
    print(f"error   {str(e).splitlines()[0][:100]}")

# 6. Timing against jax.pure_callback doing the same work (forward only:
#    pure_callback has no derivatives).
pure = jax.jit(
    lambda x: jax.pure_callback(
        lambda v: scipy.special.gammaln(v), jax.ShapeDtypeStruct(x.shape, x.dtype), x
    )
)
ours = jax.jit(gammaln)
for n in (1, 1_000_000):
    xn = x[:n]
    t_pure, t_ours = median_ms(pure, xn), median_ms(ours, xn)
    print(
        f"time    n={n:>9,}: xlabind {t_ours:8.3f} ms, pure_callback {t_pure:8.3f} ms, "
        f"ratio {t_pure / t_ours:5.2f}x"
    )

assert np.isclose(value, expected) and np.allclose(g, g_ref, rtol=1e-9, atol=1e-9)
assert np.allclose(np.diag(h), scipy.special.polygamma(1, np.asarray(points)))
print("demo OK")
