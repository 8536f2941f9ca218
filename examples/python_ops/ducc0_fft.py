"""ducc0's FFTs as linear JAX operations: jit, vmap (native batching), grad.

`c2c` (complex FFT, unnormalized) and `genuine_fht` (Hartley transform) are
linear and their matrices are symmetric, so each is its own transpose (the
linear transpose, not the adjoint: the inverse FFT would be wrong here).

    import jax.numpy as jnp
    from python_ops.ducc0_fft import c2c
    y = c2c(jnp.ones((4, 8), jnp.complex64), axes=(1,))

Under vmap the function runs once on the whole batch: ducc0 learns which axes
are batch axes from `batch_axes` and transforms only the others.
"""

from __future__ import annotations

import ducc0
import jax
import numpy as np

import xlabind


def _transform_axes(ndim: int, axes, batch_axes) -> list[int]:
    """The axes to transform: `axes` counts only the non-batch axes."""
    data_axes = [a for a in range(ndim) if not batch_axes or a not in batch_axes[0]]
    if axes is None:
        return data_axes
    return [data_axes[a] for a in ((axes,) if isinstance(axes, int) else axes)]


def _same_shape(x, *, batch_axes=None, **_):
    if batch_axes:  # under vmap: the result's newest batch axis is the input's
        return xlabind.BatchedResult(x.shape, x.dtype, batch_axes[0][-1])
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def _complex_same_shape(x, **kwargs):
    if not np.issubdtype(x.dtype, np.complexfloating):
        raise TypeError(f"c2c: x must be complex64 or complex128, got {x.dtype}")
    return _same_shape(x, **kwargs)


def _real_same_shape(x, **kwargs):
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"genuine_fht: x must be float32 or float64, got {x.dtype}")
    return _same_shape(x, **kwargs)


def _c2c(x, *, out, axes=None, forward=True, nthreads=1, batch_axes=None):
    ducc0.fft.c2c(
        x,
        axes=_transform_axes(x.ndim, axes, batch_axes),
        forward=forward,
        out=out,
        nthreads=nthreads,
    )


def _fht(x, *, out, axes=None, nthreads=1, batch_axes=None):
    ducc0.fft.genuine_fht(
        x, axes=_transform_axes(x.ndim, axes, batch_axes), out=out, nthreads=nthreads
    )


#: c2c(x, *, axes=None, forward=True, nthreads=1): ducc0.fft.c2c without normalization.
c2c = xlabind.linear(
    _c2c,
    _c2c,
    _complex_same_shape,
    transpose_shape_dtypes=_same_shape,
    in_place=True,
    vmap_method="native",
    name="ducc0.fft.c2c",
)

#: genuine_fht(x, *, axes=None, nthreads=1): ducc0.fft.genuine_fht, unnormalized.
genuine_fht = xlabind.linear(
    _fht,
    _fht,
    _real_same_shape,
    transpose_shape_dtypes=_same_shape,
    in_place=True,
    vmap_method="native",
    name="ducc0.fft.genuine_fht",
)
