"""xlabind: run fast code that JAX cannot see inside jax.jit, jax.vmap and jax.grad.

Public API:
  callback(fn, result_shape_dtypes, ...)            no derivatives
  linear(fn, transpose, result_shape_dtypes, ...)   a linear map and its transpose
  multilinear(fn, transposes, result_shape_dtypes, ...)
  nonlinear(fn, result_shape_dtypes, jvp=..., vjp=..., ...)
  ffi_target(name, ...)        a native XLA FFI target, bound in place of a Python function
  register_ffi_targets(...)    registers an extension module's handlers with jax
  traceable(jvp)               a JVP rule written in JAX
  ShardingRule(einsum, summed=...)  a sharding rule with summed (contracted) factors
  check_sharding(fn, *args)    the sharded call against the call on one device
  BoundFunction (what they return), BatchedResult, VMAP_METHODS, EFFECTS, SUPPORTED_DTYPES
  xlabind.ops: native ops (map_coordinates); xlabind.cuda: for CUDA callbacks
  xlabind.jaxbind: a drop-in replacement for jaxbind 1.3.1
"""

# First: a jax known not to work gets a clear ImportError, not a crash; one
# the tests have not run on, a warning.
from xlabind import _compatibility
from xlabind._compatibility import UntestedVersionWarning

_compatibility.check()

# The package in layers, each importing only those below it
# (tests/test_module_graph.py): _primitive (the one primitive, what a bound
# function is, its vmap and derivative rules), _runtime (the compiled
# modules, how a call runs: Python functions on XLA's buffers, native
# targets), _lowering (the custom call each platform gets, sharded programs);
# above them the public modules. The rules and the lowering register
# themselves on the primitive when imported.
from xlabind._lowering import rule as _lowering_rule  # noqa: F401
from xlabind._primitive import batching as _batching  # noqa: F401
from xlabind._primitive import derivatives as _derivatives  # noqa: F401
from xlabind._primitive.definition import EFFECTS, VMAP_METHODS, BatchedResult, BoundFunction
from xlabind._primitive.factors import ShardingRule
from xlabind._primitive.traced_rules import traceable
from xlabind._runtime.extension import SUPPORTED_DTYPES, register_ffi_targets
from xlabind._runtime.native_targets import FfiTarget, ffi_target
from xlabind.callback import callback
from xlabind.linear import linear
from xlabind.multilinear import multilinear
from xlabind.nonlinear import nonlinear
from xlabind.sharding_check import check_sharding

#: The name earlier versions gave BoundFunction.
Callback = BoundFunction

__version__ = "0.4.0"
__all__ = ["BatchedResult", "BoundFunction", "Callback", "EFFECTS", "FfiTarget",
           "SUPPORTED_DTYPES", "ShardingRule", "UntestedVersionWarning", "VMAP_METHODS", "callback",
           "check_sharding", "ffi_target", "linear", "multilinear", "nonlinear",
           "register_ffi_targets", "traceable"]
