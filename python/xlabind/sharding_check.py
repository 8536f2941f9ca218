"""`xlabind.check_sharding`: the opt-in numeric check of a sharding rule.

What a rule says about ranks, sizes and factor names is checked when the
function is called (_primitive/factors.py). Whether the function really computes each
independent index on its own, and really sums over a summed factor, only its
numbers can tell: this runs the call as sharded and on one device, and
compares.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def _tolerance(dtype: np.dtype) -> float:
    """How far two orders of the same sums may part, relative to the largest
    magnitude of the result: a summed factor adds partial results in another
    order than one call does."""
    if jnp.issubdtype(dtype, jnp.complexfloating):
        bits = 4 * dtype.itemsize  # per component
    elif jnp.issubdtype(dtype, jnp.floating):
        bits = 8 * dtype.itemsize
    else:
        return 0.0  # integers and bools: exact
    return 1e-9 if bits >= 64 else 1e-4 if bits >= 32 else 1e-2 if bits >= 16 else 0.25


def _is_split(x: Any) -> bool:
    """Whether `x` is an array whose pieces live on different devices."""
    sharding = getattr(x, "sharding", None)
    return (
        sharding is not None and len(sharding.device_set) > 1 and not sharding.is_fully_replicated
    )


def check_sharding(
    fn: Any, *args: Any, rtol: float | None = None, atol: float | None = None, **static_kwargs: Any
) -> None:
    """Checks that `fn` (a bound function, or any function of arrays that calls
    one) gives the same numbers on `args` as placed (sharded over devices)
    and on one device, where every call sees whole arrays. Raises
    ``AssertionError`` naming the result and the largest difference.

    Use it in your tests, on data like your own (at least one argument
    split across devices: otherwise it raises ``ValueError``, having
    nothing to compare), when you write a ``sharding_rule``: a factor
    declared independent or summed that is not shows up here as a
    difference. By default the results must agree to the
    rounding of their dtype (``rtol`` 1e-9 for 64-bit floats, 1e-4 for 32-bit,
    1e-2 for 16-bit, 0.25 for 8-bit; exact for integers and bools), with ``atol``
    that ``rtol`` times the result's largest magnitude: sums over a summed
    factor add the same terms in another order.

    Example:
      >>> import jax, jax.numpy as jnp, numpy as np, xlabind
      >>> from jax.sharding import NamedSharding, PartitionSpec
      >>> mesh = jax.sharding.Mesh(np.array(jax.devices()), ("d",))
      >>> x = jnp.arange(8.0).reshape(len(jax.devices()), -1)
      >>> rows = jax.device_put(x, NamedSharding(mesh, PartitionSpec("d")))
      >>> total = xlabind.callback(
      ...     lambda x: np.asarray(x).sum(0),
      ...     lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype),
      ...     sharding_rule=xlabind.ShardingRule("b n -> n", summed="b"))
      >>> xlabind.check_sharding(total, rows)
    """
    name = getattr(fn, "name", getattr(fn, "__name__", repr(fn)))
    if not any(_is_split(x) for x in jax.tree.leaves(args)):
        raise ValueError(
            f"xlabind.check_sharding: {name}: no argument is split across devices, so the "
            f"call as placed is the call on one device and there is nothing to compare. Place "
            f"an argument over several devices first, e.g. jax.device_put(x, "
            f"jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec('d')))."
        )
    sharded = jax.jit(lambda *xs: fn(*xs, **static_kwargs))(*args)
    one = jax.devices()[0]
    # On one device, whatever mesh the caller's `with jax.set_mesh(...)` set
    # (jit refuses arrays on other devices than the context mesh's).
    with jax.set_mesh(jax.make_mesh((1,), ("one",), devices=[one])):
        whole = jax.jit(lambda *xs: fn(*xs, **static_kwargs))(
            *[jax.device_put(np.asarray(x), one) if isinstance(x, jax.Array) else x for x in args]
        )
    got, want = jax.tree.leaves(sharded), jax.tree.leaves(whole)
    for j, (a, b) in enumerate(zip(got, want)):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            raise AssertionError(
                f"xlabind.check_sharding: {name}: result {j} is {a.dtype}"
                f"{list(a.shape)} sharded, {b.dtype}{list(b.shape)} on one "
                f"device"
            )
        if not jnp.issubdtype(b.dtype, jnp.inexact):
            if not np.array_equal(a, b):
                raise AssertionError(
                    f"xlabind.check_sharding: {name}: result {j} differs between the sharded "
                    f"call and the call on one device ({np.sum(a != b)} of {a.size} elements): "
                    f"check that the factors of its sharding_rule are independent or summed "
                    f"as declared"
                )
            continue
        r = _tolerance(b.dtype) if rtol is None else rtol
        # Compared as float64 or complex128: ml_dtypes' floats are not numpy's.
        wide = np.complex128 if jnp.issubdtype(b.dtype, jnp.complexfloating) else np.float64
        a, b = a.astype(wide), b.astype(wide)
        scale = float(np.nanmax(np.abs(b), initial=0.0)) if b.size else 0.0
        t = r * scale if atol is None else atol
        if not np.allclose(a, b, rtol=r, atol=t, equal_nan=True):
            worst = np.nanmax(np.abs(a - b))
            raise AssertionError(
                f"xlabind.check_sharding: {name}: result {j} differs between the sharded call "
                f"and the call on one device (largest difference {worst:.3g}, rtol={r:g}, "
                f"atol={t:g}): check that the factors of its sharding_rule are independent "
                f"or summed as declared"
            )
