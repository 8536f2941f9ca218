"""scipy.special.gammaln as a nonlinear JAX operation with derivatives to order 2.

Its JVP and VJP are both x, t -> digamma(x) * t. That function is itself
bound with xlabind.nonlinear (its own derivatives use polygamma(1, x)), so
jax.hessian of anything built on gammaln works; a third derivative says it
needs one more level.
"""

from __future__ import annotations

import numpy as np
import scipy.special

import xlabind


def _cast(value, like):
    return np.asarray(value, dtype=like.dtype)


def _digamma_times(x, t):
    return _cast(scipy.special.digamma(x) * t, x)


def _digamma_times_jvp(x, t, dx, dt):
    return _cast(
        scipy.special.polygamma(1, x) * t * dx + scipy.special.digamma(x) * dt, x
    )


def _digamma_times_vjp(x, t, ct):
    return (
        _cast(scipy.special.polygamma(1, x) * t * ct, x),
        _cast(scipy.special.digamma(x) * ct, x),
    )


def _like_first(x, *rest):
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"gammaln: x must be float32 or float64, got {x.dtype}")
    return x


#: digamma_times(x, t) = digamma(x) * t, with first derivatives.
digamma_times = xlabind.nonlinear(
    _digamma_times,
    _like_first,
    jvp=_digamma_times_jvp,
    vjp=_digamma_times_vjp,
    name="digamma_times",
)

#: gammaln(x) = log|Gamma(x)|, differentiable twice in every mode.
gammaln = xlabind.nonlinear(
    lambda x: _cast(scipy.special.gammaln(x), x),
    _like_first,
    jvp=digamma_times,
    vjp=digamma_times,
    name="scipy.special.gammaln",
)
