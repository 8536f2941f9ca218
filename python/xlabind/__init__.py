"""xlabind: run fast code that JAX cannot see inside jax.jit.

Public API:
  callback(fn, result_shape_dtypes, *, in_place=False, name=None) -> Callback
  SUPPORTED_DTYPES: the dtypes a callback can receive and produce.
"""

from xlabind._native import SUPPORTED_DTYPES
from xlabind.callback import Callback, callback

__version__ = "0.1.0"
__all__ = ["Callback", "SUPPORTED_DTYPES", "callback"]
