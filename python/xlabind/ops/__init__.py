"""Native ops, bound with xlabind's own API (C++ on the CPU, CUDA kernels on GPUs).

map_coordinates(input, coordinates, order, mode="constant", cval=0.0, prefilter=True)
    jax.scipy.ndimage.map_coordinates (orders 0, 1), and SciPy's B-splines
    of orders 2 to 5
spline_filter(input, order=3, mode="mirror", axes=None)
    scipy.ndimage.spline_filter: the B-spline prefilter, linear, with its transpose
"""

# First: the ops' compiled modules, registered with jax.
from xlabind.ops import _native  # noqa: F401
from xlabind.ops.map_coordinates import map_coordinates
from xlabind.ops.spline_filter import spline_filter

__all__ = ["map_coordinates", "spline_filter"]
