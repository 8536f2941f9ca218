"""xlabind demo: a SciPy function, bound once, called eagerly and under jax.jit.

    tools/bazel run //python:demo
"""

import time

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special

import xlabind

jax.config.update("jax_enable_x64", True)

# 1. Bind: scipy.special.gammaln has no JAX twin that accepts a `scale` option,
#    and runs on NumPy arrays. The result has the input's shape and dtype.
calls = []


def scaled_gammaln(x, *, scale):
    calls.append((type(x).__name__, x.shape, x.dtype, x.flags.writeable))
    return scale * scipy.special.gammaln(x)


gammaln = xlabind.callback(scaled_gammaln, lambda x, **_: x)

# 2. Use it inside a jitted JAX program, with a static keyword argument.
@jax.jit
def loss(x):
    return jnp.sum(gammaln(jnp.abs(x) + 1.0, scale=2.0) ** 2)


x = jnp.linspace(-3.0, 3.0, 1_000_000)
value = loss(x)
expected = np.sum((2.0 * scipy.special.gammaln(np.abs(np.asarray(x)) + 1.0)) ** 2)
print(f"loss(x) under jax.jit  = {float(value):.6f}")
print(f"same sum in NumPy      = {expected:.6f}")
print(f"the callback received  = {calls[-1][0]} shape={calls[-1][1]} dtype={calls[-1][2]} "
      f"writeable={calls[-1][3]} (a read-only view of XLA's buffer)")

# 3. Several results, in place (no copy): the function fills `out` itself.
def stats(x, *, out):
    mean, spread = out
    mean[...] = x.mean()
    spread[...] = x.max() - x.min()


scalar = jax.ShapeDtypeStruct((), jnp.float64)
stats_op = xlabind.callback(stats, (scalar, scalar), in_place=True)
mean, spread = jax.jit(stats_op)(x)
print(f"in-place results       = mean {float(mean):+.3f}, spread {float(spread):.3f}")

# 4. An exception inside the callback reaches the caller; the process lives on.
def picky(x):
    raise ValueError(f"picky refuses an array of shape {x.shape}")


try:
    jax.jit(xlabind.callback(picky, lambda x: x))(x[:3])
except Exception as e:  # jax raises JaxRuntimeError carrying the message
    print(f"callback error reached = {type(e).__name__}: {str(e).splitlines()[0]}")

# 5. Time it: median of the jitted call after warm-up.
times = []
for _ in range(20):
    t0 = time.perf_counter()
    loss(x).block_until_ready()
    times.append(time.perf_counter() - t0)
print(f"jitted loss on 10^6 elements: {1e3 * sorted(times)[len(times) // 2]:.2f} ms (median of 20)")
assert np.isclose(float(value), expected), "the jitted result disagrees with NumPy"
print("demo OK")
