"""Native ops, bound with xlabind's own API (C++ on the CPU, CUDA kernels on GPUs).

map_coordinates(input, coordinates, order, mode="constant", cval=0.0, prefilter=True)
    jax.scipy.ndimage.map_coordinates (orders 0, 1), and SciPy's B-splines
    of orders 2 to 5
spline_filter(input, order=3, mode="mirror", axes=None)
    scipy.ndimage.spline_filter: the B-spline prefilter, linear, with its transpose
"""

# One package an op, as ffi/ops/ holds their kernels: map_coordinates/ and
# spline_filter/, each with the op (op.py: the public function, its rules and
# native targets) and its TPU formulation. What they share sits beside them:
# _native.py loads and registers the ops' compiled modules, modes.py defines
# the enums the kernels take (the interpolation mode, the filter's boundary),
# bspline.py the B-spline both TPU formulations evaluate.

# First: the ops' compiled modules, registered with jax.
from xlabind.ops import _native  # noqa: F401
from xlabind.ops.map_coordinates import map_coordinates
from xlabind.ops.spline_filter import spline_filter

__all__ = ["map_coordinates", "spline_filter"]
