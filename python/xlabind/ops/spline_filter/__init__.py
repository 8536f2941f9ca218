"""xlabind.ops.spline_filter, one module an implementation (as
ffi/ops/spline_filter/ holds its native kernels):

  op.py               the public function, its rules (vmap, sharding) and its
                      native targets
  tpu_formulation.py  those targets written in JAX, which a TPU program lowers

xlabind.ops exports the function under this package's name: there
`spline_filter` is the function, and the modules are reached as
`from xlabind.ops.spline_filter import op`.
"""

from xlabind.ops.spline_filter.op import spline_filter

__all__ = ["spline_filter"]
