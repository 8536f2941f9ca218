"""Helpers for tests of vmap_method="native": elementwise functions that accept
arrays in any batch layout xlabind hands them.

A native function receives, per argument, one batch-axes entry per vmap level
(innermost first; None where the argument is not batched at that level).
These helpers move every level to the front, outermost first, with size 1
where an argument lacks the level, so that NumPy broadcasting lines the
arguments up; results are returned in that layout (the newest level at axis 0).
"""

import jax
import numpy as np

import xlabind


def to_front(x, entry):
    """`x` with its level axes in front, outermost first (size 1 where missing)."""
    present = [a for a in entry if a is not None]
    core = [d for d in range(np.ndim(x)) if d not in present]
    order = [entry[level] for level in reversed(range(len(entry))) if entry[level] is not None]
    y = np.transpose(x, order + core)
    sizes = iter(y.shape)
    shape = [
        next(sizes) if entry[level] is not None else 1 for level in reversed(range(len(entry)))
    ]
    return y.reshape(shape + list(sizes))


def elementwise(fn):
    """A native-vmap function computing `fn` elementwise on aligned arguments."""

    def native(*args, batch_axes=None, **kwargs):
        if batch_axes is None:
            return fn(*args, **kwargs)
        aligned = [to_front(a, e) for a, e in zip(args, batch_axes)]
        levels = len(batch_axes[0])
        shape = np.broadcast_shapes(*(a.shape for a in aligned))
        return np.broadcast_to(fn(*aligned, **kwargs), shape).copy() if levels else fn(*args)

    return native


def elementwise_shape(*args, batch_axes=None, **kwargs):
    """Result shape of `elementwise`: the first argument's core shape, levels in front."""
    del kwargs
    if batch_axes is None:
        return jax.ShapeDtypeStruct(args[0].shape, args[0].dtype)
    levels = len(batch_axes[0])
    sizes = []
    for level in reversed(range(levels)):
        size = next(a.shape[e[level]] for a, e in zip(args, batch_axes) if e[level] is not None)
        sizes.append(size)
    first, entry = args[0], batch_axes[0]
    core = tuple(d for k, d in enumerate(first.shape) if k not in entry)
    return xlabind.BatchedResult((*sizes, *core), first.dtype, 0)


def single_result_shape(index):
    """`elementwise_shape` of argument `index` alone (a transpose's result)."""

    def shape(*args, batch_axes=None, **kwargs):
        if batch_axes is None:
            return jax.ShapeDtypeStruct(args[index].shape, args[index].dtype)
        return elementwise_shape(
            args[index], *args, batch_axes=(batch_axes[index], *batch_axes), **kwargs
        )

    return shape
