"""Native ops, bound with xlabind's own API (C++ on the CPU, CUDA kernels on GPUs).

  map_coordinates(input, coordinates, order, mode="constant", cval=0.0)
      a drop-in for jax.scipy.ndimage.map_coordinates
"""

from xlabind.ops.map_coordinates import map_coordinates

__all__ = ["map_coordinates"]
