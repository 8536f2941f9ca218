"""`xlabind.ops.spline_filter`: scipy.ndimage.spline_filter as native kernels
(ffi/ops/spline_filter: lines in parallel on XLA's thread pool on the CPU,
one CUDA thread a line on GPUs), bound with xlabind's API for native targets.

The prefilter is linear in its input: ``xlabind.linear`` of the native
filter, with the native transpose (the recursions run backwards) as its
transpose, so every derivative works; vmap filters the whole batch in one
call (the filtered axes are counted from the end, the batch is in front).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

# The package's public names, from the modules that define them: `import
# xlabind` here would run back up to the package, whose __init__ imports
# xlabind.ops last (tests/api/test_module_graph.py).
from xlabind._primitive.definition import BoundFunction
from xlabind._runtime.native_targets import ffi_target
from xlabind.linear import linear
from xlabind.ops._native import NATIVE_PLATFORMS
from xlabind.ops.modes import Boundary
from xlabind.ops.spline_filter import tpu_formulation

# On TPUs, which run no native handlers, the same computations in JAX.
_FILTER = ffi_target(
    "xlabind_spline_filter",
    platforms=NATIVE_PLATFORMS,
    formulations={"tpu": tpu_formulation.spline_filter},
)
_FILTER_TRANSPOSE = ffi_target(
    "xlabind_spline_filter_transpose",
    platforms=NATIVE_PLATFORMS,
    formulations={"tpu": tpu_formulation.spline_filter_transpose},
)

#: Each mode's extension of the signal, as the filter's recursions start from
#: it: mirror (whole-sample symmetric), reflect (half-sample symmetric), wrap
#: (periodic). xlabind reads "wrap" as the periodic extension, as jax's
#: map_coordinates does (SciPy's "grid-wrap"; SciPy's own "wrap" filters with
#: mirror boundaries); "constant" and "nearest" filter as SciPy does (mirror
#: and reflect).
BOUNDARIES = {
    "mirror": Boundary.MIRROR,
    "constant": Boundary.MIRROR,
    "grid-constant": Boundary.MIRROR,
    "reflect": Boundary.REFLECT,
    "grid-mirror": Boundary.REFLECT,
    "nearest": Boundary.REFLECT,
    "wrap": Boundary.WRAP,
    "grid-wrap": Boundary.WRAP,
}


def _sharding_rule(x: jax.ShapeDtypeStruct, *, axes: tuple[int, ...], **_: Any) -> str:
    """Every axis it does not filter is independent; a filtered axis stays
    whole (its result dimension has a factor of its own, which no operand
    splits)."""
    filtered = {a % x.ndim for a in axes}
    operand = [f"w{i}" if i in filtered else f"i{i}" for i in range(x.ndim)]
    result = [f"r{i}" if i in filtered else f"i{i}" for i in range(x.ndim)]
    return f"{' '.join(operand)} -> {' '.join(result)}"


@functools.cache
def _bound() -> BoundFunction:
    return linear(
        _FILTER,
        _FILTER_TRANSPOSE,
        lambda x, **_: x,
        vmap_method="expand_dims",
        sharding_rule=_sharding_rule,
        # The kernels fail only on shapes and arguments, which every device's
        # shard shares: no device can fail alone, so none waits for a
        # failure exchange (a collective that a branch only some devices
        # take would strand; jax's own ops need none).
        stop_all_devices=False,
        name="spline_filter",
    )


def checked_order(where: str, order: Any, low: int) -> int:
    """`order` as an int from `low` to 5 (integer-valued numbers, as jax takes them)."""
    value: int | None
    try:
        value = operator.index(order)
    except TypeError:
        integral = isinstance(order, (float, np.floating)) and float(order).is_integer()
        value = int(order) if integral else None
    if value is None:
        raise ValueError(
            f"{where}: order must be an integer ({low} to 5), got {order!r} of "
            f"type {type(order).__name__}"
        )
    if not low <= value <= 5:
        raise NotImplementedError(f"{where}: order must be {low} to 5, got {order!r}")
    return value


def spline_filter(
    input: ArrayLike, order: int = 3, mode: str = "mirror", axes: int | Sequence[int] | None = None
) -> jax.Array:
    """The B-spline coefficients of ``input``, like
    :func:`scipy.ndimage.spline_filter`: the recursive prefilter along each
    of ``axes`` (all by default), with native kernels.

    Args:
      input: an array, float32 or float64 (integers are filtered as floats;
        complex arrays part by part).
      order: the spline's degree, 2 to 5 (0 and 1 need no filter: the input
        is returned as it is, as a float array).
      mode: how the signal continues past its ends, which starts each
        recursion: ``"mirror"`` (whole-sample symmetric; also for
        ``"constant"``), ``"reflect"`` (half-sample symmetric; also
        ``"nearest"`` and ``"grid-mirror"``), or ``"wrap"`` (periodic, SciPy's
        ``"grid-wrap"``; SciPy's own ``"wrap"`` filters as ``"mirror"``).
      axes: the axes to filter, in that order.

    Returns:
      The coefficients, of ``input``'s (floating) dtype and shape. Linear in
      ``input`` and differentiable (its transpose is native too); vmap filters
      the batch in one call. Computed in float64 whatever the dtype.

    Example:
      >>> import jax.numpy as jnp
      >>> from xlabind.ops import map_coordinates, spline_filter
      >>> samples = jnp.array([0.0, 1.0, 0.0, 0.0])
      >>> coefficients = spline_filter(samples, order=3)  # the cubic through the samples
      >>> at_nodes = map_coordinates(coefficients, [jnp.arange(4.0)], 3, "mirror",
      ...                            prefilter=False)
      >>> jnp.round(at_nodes, 5) + 0.0
      Array([0., 1., 0., 0.], dtype=float32)
    """
    where = "xlabind.ops.spline_filter"
    order = checked_order(where, order, 0)
    if not isinstance(mode, str) or mode not in BOUNDARIES:
        raise NotImplementedError(
            f"{where}: mode must be one of {sorted(BOUNDARIES)}, got {mode!r}"
        )
    if axes is not None:
        try:
            listed = np.asarray(axes).ravel().tolist() if hasattr(axes, "shape") else axes
            axes = (
                (operator.index(listed),)
                if not isinstance(listed, Sequence)
                else tuple(operator.index(a) for a in listed)
            )
        except TypeError:
            raise TypeError(
                f"{where}: axes must be an int or a sequence of ints, got {axes!r}"
            ) from None
    x = jnp.asarray(input) if isinstance(input, (list, tuple)) else input
    filtered: jax.Array = _spline_filter(x, order=order, mode=mode, axes=axes)
    return filtered


def _resharded(x: jax.Array, entries: Sequence[Any]) -> jax.Array:
    """`x` split as ``PartitionSpec(*entries)`` over the current mesh."""
    spec = jax.sharding.PartitionSpec(*entries)  # type: ignore[no-untyped-call]
    resharded: jax.Array = jax.sharding.reshard(x, spec)  # type: ignore[no-untyped-call]
    return resharded


# One executable per static configuration and shape: one dispatch eagerly.
@functools.partial(jax.jit, static_argnames=("order", "mode", "axes"))
def _spline_filter(
    x: ArrayLike, *, order: int, mode: str, axes: tuple[int, ...] | None
) -> jax.Array:
    where = "xlabind.ops.spline_filter"
    x = jnp.asarray(x)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        return jax.lax.complex(
            _spline_filter(x.real, order=order, mode=mode, axes=axes),
            _spline_filter(x.imag, order=order, mode=mode, axes=axes),
        )
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))  # float32, or float64 with jax_enable_x64
    elif x.dtype not in (jnp.float32, jnp.float64):  # float16, bfloat16, float8: via float32
        widened: jax.Array = _spline_filter(
            x.astype(jnp.float32), order=order, mode=mode, axes=axes
        )
        return widened.astype(x.dtype)
    if axes is None:
        axes = tuple(range(x.ndim))
    counted_from_end = []
    for a in axes:
        if not -x.ndim <= a < x.ndim:
            raise ValueError(
                f"{where}: axis {a} is out of range for an array of {x.ndim} dimensions"
            )
        counted_from_end.append(a - x.ndim if a >= 0 else a)
    if len(set(counted_from_end)) != len(counted_from_end):
        raise ValueError(f"{where}: axes {tuple(axes)} name an axis twice")
    if order < 2 or not counted_from_end or x.size == 0:
        return x
    # Under Explicit mesh axes the type says how x is split (Auto: nothing).
    spec = tuple(getattr(getattr(jax.typeof(x), "sharding", None), "spec", None) or ())
    split = spec + (None,) * (x.ndim - len(spec))
    filtered = {a + x.ndim for a in counted_from_end}
    if any(split[a] is not None for a in filtered):
        # A split axis is filtered whole (each line needs all of its
        # samples), then split again as it came.
        whole = [None if a in filtered else entry for a, entry in enumerate(split)]
        gathered = _resharded(x, whole)
        return _resharded(_spline_filter(gathered, order=order, mode=mode, axes=axes), split)
    # The kernels' boundary attribute: a plain int, as the programs it is in carry it.
    coefficients: jax.Array = _bound()(
        x, order=order, boundary=int(BOUNDARIES[mode]), axes=tuple(counted_from_end)
    )
    return coefficients
