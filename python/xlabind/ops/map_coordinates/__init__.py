"""xlabind.ops.map_coordinates, one module an implementation (as
ffi/ops/map_coordinates/ holds its native kernels):

  op.py               the public function, its rules (the derivative in the
                      coordinates, vmap, sharding) and its native targets
  tpu_formulation.py  those targets written in JAX, which a TPU program lowers
  tpu_kernels.py      the Pallas kernels the TPU formulation reads its tables with

xlabind.ops exports the function under this package's name: there
`map_coordinates` is the function, and the modules are reached as
`from xlabind.ops.map_coordinates import op`.
"""

from xlabind.ops.map_coordinates.op import map_coordinates

__all__ = ["map_coordinates"]
