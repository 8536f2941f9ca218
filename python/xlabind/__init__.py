"""xlabind: run fast code that JAX cannot see inside jax.jit, jax.vmap and jax.grad.

Public API:
  callback(fn, result_shape_dtypes, ...)            no derivatives
  linear(fn, transpose, result_shape_dtypes, ...)   a linear map and its transpose
  multilinear(fn, transposes, result_shape_dtypes, ...)
  nonlinear(fn, result_shape_dtypes, jvp=..., vjp=..., ...)
  BatchedResult, VMAP_METHODS, SUPPORTED_DTYPES
  xlabind.jaxbind: a drop-in replacement for jaxbind 1.3.1
"""

from xlabind import callback_primitive as _callback_primitive  # noqa: F401  (registers the rules)
from xlabind._native import SUPPORTED_DTYPES
from xlabind.callback import VMAP_METHODS, BatchedResult, Callback, callback
from xlabind.linear import linear
from xlabind.multilinear import multilinear
from xlabind.nonlinear import nonlinear

__version__ = "0.2.0"
__all__ = ["BatchedResult", "Callback", "SUPPORTED_DTYPES", "VMAP_METHODS", "callback", "linear",
           "multilinear", "nonlinear"]
