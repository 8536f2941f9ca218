"""xlabind: run fast code that JAX cannot see inside jax.jit, jax.vmap and jax.grad.

A NumPy, SciPy, CuPy or PyTorch function, or a C++ or CUDA XLA FFI handler,
becomes a JAX operation: give it the shapes of its results and, to
differentiate it, what JAX needs to know about its derivatives.

  callback(fn, result_shape_dtypes, ...)            no derivatives
  linear(fn, transpose, result_shape_dtypes, ...)   a linear map and its transpose
  multilinear(fn, transposes, result_shape_dtypes, ...)
  nonlinear(fn, result_shape_dtypes, jvp=..., vjp=..., ...)
  ffi_target(name, ...)        a native XLA FFI target in a Python function's place
  register_ffi_targets(module) an extension module's handlers, registered with jax
  include_dir(), cmake_dir()   the native API's headers and CMake package
  traceable(jvp)               a JVP rule written in JAX
  ShardingRule, check_sharding how a call is split across devices, and a check
  xlabind.ops: native ops (map_coordinates, spline_filter); xlabind.cuda: for
  CUDA callbacks; xlabind.jaxbind: a drop-in replacement for jaxbind 1.3.1

Example:
  >>> import jax, jax.numpy as jnp, numpy as np, xlabind
  >>> sin = xlabind.nonlinear(np.sin, lambda x: x,
  ...                         jvp=lambda x, t: np.cos(x) * t,
  ...                         vjp=lambda x, ct: np.cos(x) * ct)
  >>> jax.jit(jax.grad(lambda x: sin(x).sum()))(jnp.zeros(2))
  Array([1., 1.], dtype=float32)
"""

# First: a jax known not to work gets a clear ImportError, not a crash; one
# the tests have not run on, a warning.
from xlabind import _compatibility
from xlabind._compatibility import UntestedVersionWarning

_compatibility.check()

# The package in layers, each importing only those below it
# (tests/api/test_module_graph.py): _primitive (the one primitive, what a bound
# function is, its vmap and derivative rules), _runtime (the compiled
# modules, how a call runs: Python functions on XLA's buffers, native
# targets), _lowering (the custom call each platform gets, sharded programs);
# above them the public modules. The rules and the lowering register
# themselves on the primitive when imported.
from xlabind._lowering import rule as _lowering_rule  # noqa: F401
from xlabind._primitive import batching as _batching  # noqa: F401
from xlabind._primitive import derivatives as _derivatives  # noqa: F401
from xlabind._primitive.definition import (
    EFFECTS,
    VMAP_METHODS,
    BatchedResult,
    BoundFunction,
    ResultSpec,
)
from xlabind._primitive.factors import Rule, ShardingRule
from xlabind._primitive.traced_rules import Traceable, traceable
from xlabind._runtime.extension import SUPPORTED_DTYPES, register_ffi_targets
from xlabind._runtime.make_definition import Function
from xlabind._runtime.native_targets import FfiTarget, ffi_target
from xlabind.callback import callback
from xlabind.linear import linear
from xlabind.multilinear import multilinear
from xlabind.native_build import cmake_dir, include_dir
from xlabind.nonlinear import nonlinear
from xlabind.sharding_check import check_sharding

#: The name earlier versions gave BoundFunction.
Callback = BoundFunction

__version__ = "0.5.0"
__all__ = [
    "BatchedResult",
    "BoundFunction",
    "Callback",
    "EFFECTS",
    "FfiTarget",
    "Function",
    "ResultSpec",
    "Rule",
    "SUPPORTED_DTYPES",
    "ShardingRule",
    "Traceable",
    "UntestedVersionWarning",
    "VMAP_METHODS",
    "callback",
    "check_sharding",
    "cmake_dir",
    "ffi_target",
    "include_dir",
    "linear",
    "multilinear",
    "nonlinear",
    "register_ffi_targets",
    "traceable",
]

# Last, once the public API exists: xlabind's own native ops, a client of it.
# `import xlabind` registers their FFI targets, which a program exported with
# them names (a deserialized jax.export artifact calls them by name alone).
from xlabind import ops as ops
