"""`xlabind.check_sharding`: the opt-in numeric check of a sharding rule.

What a rule says about ranks, sizes and factor names is checked when the
function is called (sharding.py). Whether the function really computes each
independent index on its own, and really sums over a summed factor, only its
numbers can tell: this runs the call as sharded and on one device, and
compares.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np


def check_sharding(fn: Any, *args: Any, rtol: float = 1e-6, atol: float = 0.0,
                   **static_kwargs: Any) -> None:
    """Checks that `fn` (a bound function, or any function of arrays that calls
    one) gives the same numbers on `args` as placed (sharded over devices)
    and on one device, where every call sees whole arrays. Raises
    ``AssertionError`` naming the result and the largest difference.

    Use it in your tests, on data like your own, when you write a
    ``sharding_rule``: a factor declared independent or summed that is not
    shows up here as a difference.

    Example:
      >>> import jax, jax.numpy as jnp, numpy as np, xlabind
      >>> mesh = jax.sharding.Mesh(np.array(jax.devices()), ("d",))
      >>> rows = jax.device_put(jnp.arange(8.0).reshape(len(jax.devices()), -1),
      ...                       jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("d")))
      >>> total = xlabind.callback(lambda x: np.asarray(x).sum(0),
      ...                          lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype),
      ...                          sharding_rule=xlabind.ShardingRule("b n -> n", summed="b"))
      >>> xlabind.check_sharding(total, rows)
    """
    sharded = jax.jit(lambda *xs: fn(*xs, **static_kwargs))(*args)
    one = jax.devices()[0]
    whole = jax.jit(lambda *xs: fn(*xs, **static_kwargs))(
        *[jax.device_put(np.asarray(x), one) if isinstance(x, jax.Array) else x for x in args])
    name = getattr(fn, "name", getattr(fn, "__name__", repr(fn)))
    got, want = jax.tree.leaves(sharded), jax.tree.leaves(whole)
    for j, (a, b) in enumerate(zip(got, want)):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            raise AssertionError(f"xlabind.check_sharding: {name}: result {j} is {a.dtype}"
                                 f"{list(a.shape)} sharded, {b.dtype}{list(b.shape)} on one "
                                 f"device")
        if not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
            worst = np.nanmax(np.abs(a.astype(np.complex128) - b.astype(np.complex128)))
            raise AssertionError(
                f"xlabind.check_sharding: {name}: result {j} differs between the sharded call "
                f"and the call on one device (largest difference {worst:.3g}, rtol={rtol}, "
                f"atol={atol}): check that the factors of its sharding_rule are independent "
                f"or summed as declared")
