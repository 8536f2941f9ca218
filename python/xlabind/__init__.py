"""xlabind: run fast code that JAX cannot see inside jax.jit, jax.vmap and jax.grad.

Public API:
  callback(fn, result_shape_dtypes, ...)            no derivatives
  linear(fn, transpose, result_shape_dtypes, ...)   a linear map and its transpose
  multilinear(fn, transposes, result_shape_dtypes, ...)
  nonlinear(fn, result_shape_dtypes, jvp=..., vjp=..., ...)
  BoundFunction (what they return), BatchedResult, VMAP_METHODS, SUPPORTED_DTYPES
  xlabind.jaxbind: a drop-in replacement for jaxbind 1.3.1
"""

# The primitive's rules and lowerings register themselves on import.
from xlabind import batching_rules as _batching_rules  # noqa: F401
from xlabind import derivative_rules as _derivative_rules  # noqa: F401
from xlabind import lowering as _lowering  # noqa: F401
from xlabind._extension import SUPPORTED_DTYPES
from xlabind.bound_function import VMAP_METHODS, BatchedResult, BoundFunction
from xlabind.callback import callback
from xlabind.linear import linear
from xlabind.multilinear import multilinear
from xlabind.nonlinear import nonlinear

#: The name earlier versions gave BoundFunction.
Callback = BoundFunction

__version__ = "0.3.0"
__all__ = ["BatchedResult", "BoundFunction", "Callback", "SUPPORTED_DTYPES", "VMAP_METHODS",
           "callback", "linear", "multilinear", "nonlinear"]
