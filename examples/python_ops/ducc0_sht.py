"""ducc0's 2-D spherical harmonic synthesis as a linear JAX operation.

`synthesis(alm, lmax=..., ntheta=..., nphi=...)` maps spherical harmonic
coefficients (complex, healpy ordering, shape (1, nalm)) to a real map on a
(1, ntheta, nphi) grid, with ducc0.sht.synthesis_2d.

Its transpose comes from ducc0.sht.adjoint_synthesis_2d. The map is real, so
synthesis is linear over the reals in (Re alm, Im alm): each m > 0
coefficient enters twice (as a and conj(a)), hence the factor 2, and JAX's
convention for the transpose of a complex argument is the complex conjugate
of the real transpose, hence the conj.
"""

from __future__ import annotations

import ducc0
import jax
import numpy as np

import xlabind

_REAL = {np.dtype(np.complex64): np.float32, np.dtype(np.complex128): np.float64}
_COMPLEX = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128}


def nalm(lmax: int) -> int:
    """How many coefficients a spin-0 transform with mmax = lmax has."""
    return (lmax + 1) * (lmax + 2) // 2


def _synthesis(alm, *, out, lmax, ntheta, nphi, geometry="GL", nthreads=1):
    ducc0.sht.synthesis_2d(
        alm=alm, map=out, spin=0, lmax=lmax, geometry=geometry, nthreads=nthreads
    )


def _synthesis_transpose(map_ct, *, out, lmax, ntheta, nphi, geometry="GL", nthreads=1):
    ducc0.sht.adjoint_synthesis_2d(
        map=map_ct, alm=out, spin=0, lmax=lmax, geometry=geometry, nthreads=nthreads
    )
    out[:, lmax + 1 :] *= 2  # m > 0 coefficients (stored after the lmax + 1 with m = 0)
    np.conjugate(out, out=out)


def _map_shape(alm, *, lmax, ntheta, nphi, **_):
    if np.dtype(alm.dtype) not in _REAL or alm.shape != (1, nalm(lmax)):
        raise TypeError(
            f"synthesis: alm must be complex with shape (1, {nalm(lmax)}), got "
            f"{alm.dtype} {alm.shape}"
        )
    return jax.ShapeDtypeStruct((1, ntheta, nphi), _REAL[np.dtype(alm.dtype)])


def _alm_shape(map_ct, *, lmax, **_):
    return jax.ShapeDtypeStruct((1, nalm(lmax)), _COMPLEX[np.dtype(map_ct.dtype)])


#: synthesis(alm, *, lmax, ntheta, nphi, geometry="GL", nthreads=1) -> map
synthesis = xlabind.linear(
    _synthesis,
    _synthesis_transpose,
    _map_shape,
    transpose_shape_dtypes=_alm_shape,
    in_place=True,
    name="ducc0.sht.synthesis_2d",
)
