// The arithmetic of map_coordinates, shared by the CPU handlers (C++) and the
// CUDA kernels (nvcc): how a coordinate becomes grid indices and weights, and
// how each boundary mode maps an index into the grid. Orders 0 and 1 follow
// jax.scipy.ndimage.map_coordinates exactly (modes constant, nearest, wrap,
// mirror, reflect); orders 2 to 5 are B-splines over coefficients (the
// prefilter, ffi/ops/spline_filter), with SciPy's node placement and
// weights, and the same modes (jax's reading of the names: constant and wrap
// are SciPy's grid-constant and grid-wrap). The interpolation weights may be
// differentiated along each axis. Plain C++ whose one library call (fmod)
// nvcc and the C++ toolchain both provide, so they compile it alike.
#ifndef XLABIND_FFI_OPS_MAP_COORDINATES_INTERPOLATION_H_
#define XLABIND_FFI_OPS_MAP_COORDINATES_INTERPOLATION_H_

#include <cmath>
#include <cstdint>

#include "ffi/ops/bspline/bspline.h"
#include "xlabind/native/host_device.h"

namespace xlabind::map_coordinates {

using bspline::BSpline;
using bspline::BSplineDerivative;
using bspline::CubicWeights;
using bspline::SplineWeights;

// The most spatial dimensions a grid may have.
constexpr int kMaxDims = 8;
// The most leading batch dimensions (one per vmap level).
constexpr int kMaxBatchDims = 8;

// The `mode` attribute. Python spells it python/xlabind/ops/modes.py's Mode
// (tests/native/test_op_enums.py holds the two equal).
enum Mode : int32_t { kConstant = 0, kNearest = 1, kWrap = 2, kMirror = 3, kReflect = 4 };

// Everything a kernel needs about one call; plain data, passed by value. The
// coordinates are ndim arrays of one shape, (*coordinate batch, points).
struct Geometry {
  int32_t ndim;        // spatial dimensions of the grid
  int32_t batch_dims;  // leading batch dimensions of grid, coordinates and values
  int32_t order;       // 0 (nearest), 1 (linear), 2-5 (B-spline of that degree)
  int32_t mode;        // Mode
  int64_t points;      // coordinates per batch element
  int64_t batch;       // batch elements (product of batch_shape)
  int64_t grid_size;   // grid elements per batch element
  int64_t grid_shape[kMaxDims];
  int64_t grid_strides[kMaxDims];              // in elements, within one batch element
  int32_t derivative[kMaxDims];                // order of the derivative of the weights, per axis
  int64_t batch_shape[kMaxBatchDims];          // of the values (the broadcast of the other two)
  int64_t grid_batch_strides[kMaxBatchDims];   // 0 where the grid is broadcast
  int64_t coord_batch_strides[kMaxBatchDims];  // 0 where the coordinates are
};

// The ndim coordinate arrays of a call.
template <typename T>
struct Coordinates {
  const T* axis[kMaxDims];
};

XLABIND_HOST_DEVICE int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// a modulo b > 0, in [0, b). Nodes lie within a period of the grid but for
// huge coordinates, so the division (tens of cycles on a CPU) is rarely
// needed.
XLABIND_HOST_DEVICE int64_t FloorMod(int64_t a, int64_t b) {
  if (a >= -b && a < 2 * b) return a < 0 ? a + b : (a >= b ? a - b : a);
  return a - FloorDiv(a, b) * b;
}

// |x - round(x)| as a triangular wave of half-period size - 1.
XLABIND_HOST_DEVICE int64_t Mirror(int64_t index, int64_t size) {
  if (size <= 1) return 0;
  const int64_t s = size - 1;
  const int64_t r = FloorMod(index + s, 2 * s) - s;
  return r < 0 ? -r : r;
}

XLABIND_HOST_DEVICE int64_t Reflect(int64_t index, int64_t size) {
  return FloorDiv(Mirror(2 * index + 1, 2 * size + 1) - 1, 2);
}

// Every coordinate takes the same path, whatever its magnitude (README,
// "map_coordinates on every input"):
//   NaN                      the point's value is NaN;
//   +-inf                    nearest: the edge; constant: outside (cval);
//                            wrap, mirror, reflect: NaN;
//   finite                   jax's nodes (floor(c) and floor(c) + 1 for
//                            order 1, c rounded half away from zero for order
//                            0) through the boundary mode, computed exactly
//                            at any magnitude: where jax's int32 indices are
//                            exact (|c| < 2^31 - 1) this is jax's arithmetic.
// Node indices are integral doubles until the mode has brought them into the
// grid: a double holds every integer up to 2^53 exactly, and past that every
// double is an integer.

// Below this magnitude a double's integer part fits an int64.
constexpr double kInt64Exact = 4.0e18;

// floor(x), exact for any double; NaN and +-inf pass through.
XLABIND_HOST_DEVICE double FloorOf(double x) {
  if (!(x > -kInt64Exact && x < kInt64Exact)) return x;  // integral already, or not finite
  const double truncated = static_cast<double>(static_cast<int64_t>(x));
  return truncated > x ? truncated - 1.0 : truncated;
}

// floor(x) in x's own type (exact: a float's floor is a float).
template <typename T>
XLABIND_HOST_DEVICE T FloorOf(T x) {
  return static_cast<T>(FloorOf(static_cast<double>(x)));
}

// x rounded half away from zero (lax.round), exact for any double.
XLABIND_HOST_DEVICE double RoundHalfAwayFromZero(double x) {
  if (!(x > -kInt64Exact && x < kInt64Exact)) return x;
  const double truncated = static_cast<double>(static_cast<int64_t>(x));
  const double fraction = x - truncated;  // exact
  return fraction >= 0.5 ? truncated + 1.0 : (fraction <= -0.5 ? truncated - 1.0 : truncated);
}

// `index` (an integral double) modulo `period` > 0, in [0, period).
XLABIND_HOST_DEVICE int64_t IndexModulo(double index, int64_t period) {
  if (index > -kInt64Exact && index < kInt64Exact) {
    return FloorMod(static_cast<int64_t>(index), period);
  }
  // fmod is exact; its result is smaller than the period.
  const int64_t r = static_cast<int64_t>(fmod(index, static_cast<double>(period)));
  return r < 0 ? r + period : r;
}

// Below this magnitude an integral double plus a spline's node count is exact.
constexpr double kSplineExact = 4503599627370496.0;  // 2^52

// The period of a periodic mode's index map (wrap, mirror, reflect).
XLABIND_HOST_DEVICE int64_t PeriodOf(int32_t mode, int64_t size) {
  if (mode == kWrap) return size;
  if (mode == kMirror) return size <= 1 ? 1 : 2 * (size - 1);
  return 2 * size;
}

// Maps node `index` (an integral double, finite) into [0, size) by `mode`;
// false when constant mode leaves it outside the grid.
XLABIND_HOST_DEVICE bool FixIndex(double index, int64_t size, int32_t mode, int64_t* fixed) {
  if (index >= 0.0 && index < static_cast<double>(size)) {  // every mode's identity
    *fixed = static_cast<int64_t>(index);
    return true;
  }
  switch (mode) {
    case kConstant: {
      const bool inside = index >= 0.0 && index < static_cast<double>(size);
      *fixed = inside ? static_cast<int64_t>(index) : 0;
      return inside;
    }
    case kNearest:
      *fixed = index <= 0.0                             ? 0
               : index >= static_cast<double>(size - 1) ? size - 1
                                                        : static_cast<int64_t>(index);
      return true;
    case kWrap:
      *fixed = IndexModulo(index, size);
      return true;
    case kMirror:  // periodic with period 2 (size - 1)
      *fixed = size <= 1 ? 0 : Mirror(IndexModulo(index, 2 * (size - 1)), size);
      return true;
    default:  // reflect: periodic with period 2 size
      *fixed = Reflect(IndexModulo(index, 2 * size), size);
      return true;
  }
}

// The grid nodes coordinate `c` touches along one axis (kOrder + 1 of them):
// their offsets (index * stride), their weights differentiated `derivative`
// times, and whether they lie inside the grid (constant mode). False when
// the point's value is NaN (see above); weight[0] is then a NaN.
template <typename T, int kOrder>
XLABIND_HOST_DEVICE bool AxisNodes(T c, int64_t size, int64_t stride, int32_t mode,
                                   int32_t derivative, int64_t* offset, T* weight, bool* valid) {
  constexpr int kNodes = kOrder + 1;
  if (!(c - c == T(0))) {  // NaN or +-inf
    const bool nan = c != c;
    if (nan || (mode != kConstant && mode != kNearest)) {
      weight[0] = c - c;  // NaN
      return false;
    }
    // The edge (nearest) or outside the grid (constant), every node alike.
    const int64_t edge = c > T(0) ? size - 1 : 0;
    for (int k = 0; k < kNodes; ++k) {
      offset[k] = edge * stride;
      valid[k] = mode == kNearest;
      weight[k] = T(0);
    }
    if (kOrder == 1 && derivative == 1) {
      weight[0] = T(-1);
      weight[1] = T(1);
    } else if (derivative == 0) {
      weight[0] = T(1);
    }
    return true;
  }
  if (kOrder == 0) {
    int64_t index;
    valid[0] = FixIndex(RoundHalfAwayFromZero(static_cast<double>(c)), size, mode, &index);
    offset[0] = index * stride;
    weight[0] = derivative == 0 ? T(1) : T(0);
    return true;
  }
  if (kOrder == 1) {
    const double lower = FloorOf(static_cast<double>(c));
    const T upper_weight = c - static_cast<T>(lower);  // exact
    int64_t low, high;
    valid[0] = FixIndex(lower, size, mode, &low);
    // Past 2^53, lower + 1 may round to lower; its weight is zero there.
    valid[1] = FixIndex(lower + 1.0, size, mode, &high);
    offset[0] = low * stride;
    offset[1] = high * stride;
    if (derivative == 0) {
      weight[0] = T(1) - upper_weight;
      weight[1] = upper_weight;
    } else if (derivative == 1) {
      weight[0] = T(-1);
      weight[1] = T(1);
    } else {  // piecewise linear: no curvature
      weight[0] = weight[1] = T(0);
    }
    return true;
  }
  // A B-spline of degree k >= 2 spans k + 1 nodes, as SciPy places them: from
  // floor(c) - k/2 for odd k, from round-half-up(c) - k/2 for even k; node j
  // is x + k/2 - j away from c, x being c's offset from floor(c) (odd) or
  // from the nearest node (even). Each node index goes through the mode.
  // Past 2^52 every double is an integer (its own base), and base - k/2 or
  // base + j would round onto a neighbour: a periodic mode takes base's
  // residue (exact) instead, which it maps to the same nodes. Constant and
  // nearest put every node that far out alike, rounded or not.
  const double value = static_cast<double>(c);
  const bool huge = !(value > -kSplineExact && value < kSplineExact);
  const double base = huge ? value : FloorOf(value + ((kOrder & 1) ? 0.0 : 0.5));
  const T x = c - static_cast<T>(base);
  const bool periodic = mode != kConstant && mode != kNearest;
  const double anchor =
      huge && periodic ? static_cast<double>(IndexModulo(base, PeriodOf(mode, size))) : base;
  const double start = anchor - static_cast<double>(kOrder / 2);
  for (int j = 0; j < kNodes; ++j) {
    int64_t index;
    valid[j] = FixIndex(start + static_cast<double>(j), size, mode, &index);
    offset[j] = index * stride;
  }
  SplineWeights<T, kOrder>(x, derivative, weight);
  return true;
}

// The k + 1 nodes per axis of a point whose nodes all lie inside the grid,
// for splines of degree k >= 2: then every mode is the identity, and the
// nodes sit at fixed offsets from the first, so the sum is nested loops over
// contiguous runs, with no index arithmetic per node. Most points of a
// typical call; several times faster than ForEachNode.
template <typename T, int kOrder, int kNdim>
struct SplineCell {
  int64_t first;
  T weight[kNdim][kOrder + 1];

  // Whether the point's nodes are all inside; fills the cell if so.
  XLABIND_HOST_DEVICE bool Load(const Geometry& g, const Coordinates<T>& coords, int64_t at) {
    first = 0;
    for (int a = 0; a < kNdim; ++a) {
      const T c = coords.axis[a][at];
      const T base = FloorOf(c + ((kOrder & 1) ? T(0) : T(0.5)));
      const T start = base - T(kOrder / 2);
      // Compared as floats first: NaN, infinities and huge values fail here.
      if (!(start >= T(0) && start + T(kOrder) < static_cast<T>(g.grid_shape[a]))) return false;
      const int64_t low = static_cast<int64_t>(start);
      if (low + kOrder >= g.grid_shape[a]) return false;  // float32 rounding near 2^24
      first += low * g.grid_strides[a];
      SplineWeights<T, kOrder>(c - base, g.derivative[a], weight[a]);
    }
    return true;
  }

  template <int kAxis = 0>
  XLABIND_HOST_DEVICE T Sum(const Geometry& g, const T* grid) const {
    T sum = T(0);
    for (int j = 0; j <= kOrder; ++j) {
      if constexpr (kAxis == kNdim - 1) {
        sum += weight[kAxis][j] * grid[j * g.grid_strides[kAxis]];
      } else {
        sum += weight[kAxis][j] * Sum<kAxis + 1>(g, grid + j * g.grid_strides[kAxis]);
      }
    }
    return sum;
  }

  // Adds `value` times each node's weight into the nodes, each with
  // add(address, amount) (points.h's AddTo: +=; CUDA: atomicAdd).
  template <int kAxis = 0, typename Adder>
  XLABIND_HOST_DEVICE void Add(const Geometry& g, T* grid, T value, Adder&& add) const {
    for (int j = 0; j <= kOrder; ++j) {
      if constexpr (kAxis == kNdim - 1) {
        add(grid + j * g.grid_strides[kAxis], weight[kAxis][j] * value);
      } else {
        Add<kAxis + 1>(g, grid + j * g.grid_strides[kAxis], weight[kAxis][j] * value, add);
      }
    }
  }
};

// Each axis' nodes (AxisNodes) of the point at `at` of the coordinate
// arrays, for the first `ndim` axes; returns the first axis whose coordinate
// makes the point's value NaN (its weight[0] is then a NaN), or -1.
template <typename T, int kOrder>
XLABIND_HOST_DEVICE int PointNodes(const Geometry& g, const Coordinates<T>& coords, int64_t at,
                                   int ndim, int64_t (*offset)[kOrder + 1], T (*weight)[kOrder + 1],
                                   bool (*valid)[kOrder + 1]) {
  for (int a = 0; a < ndim; ++a) {
    if (!AxisNodes<T, kOrder>(coords.axis[a][at], g.grid_shape[a], g.grid_strides[a], g.mode,
                              g.derivative[a], offset[a], weight[a], valid[a])) {
      return a;
    }
  }
  return -1;
}

// The nodes of one point from axis kAxis on, for a rank known at compile
// time: nested loops, axis 0 outermost, each node's weight the product of
// its axes' weights in axis order. (The rank-generic path below decodes a
// node number per node instead, several times slower.)
template <typename T, int kNodes, int kNdim, int kAxis, typename Visit>
XLABIND_HOST_DEVICE void VisitTensorProduct(const int64_t (*offset)[kNodes],
                                            const T (*weight)[kNodes], const bool (*valid)[kNodes],
                                            int64_t node, T w, Visit& visit) {
  for (int k = 0; k < kNodes; ++k) {
    if (!valid[kAxis][k]) continue;  // outside the grid (constant mode)
    if constexpr (kAxis == kNdim - 1) {
      visit(node + offset[kAxis][k], w * weight[kAxis][k]);
    } else {
      VisitTensorProduct<T, kNodes, kNdim, kAxis + 1>(
          offset, weight, valid, node + offset[kAxis][k], w * weight[kAxis][k], visit);
    }
  }
}

// Calls visit(grid offset, weight) for every grid node the point at `at` of
// the coordinate arrays reads, zero weights included (as jax, whose 0 * inf
// is NaN); nodes outside the grid (constant mode) are skipped: the caller
// adds cval for them. A point whose value is NaN reads node 0 with a NaN
// weight. kNdim > 0 fixes the grid's rank at compile time (the common 1-, 2-
// and 3-D cases unroll); 0 reads it from the geometry.
template <typename T, int kOrder, int kNdim, typename Visit>
XLABIND_HOST_DEVICE void ForEachNode(const Geometry& g, const Coordinates<T>& coords, int64_t at,
                                     Visit&& visit) {
  constexpr int kNodes = kOrder + 1;
  const int ndim = kNdim > 0 ? kNdim : g.ndim;
  int64_t offset[kNdim > 0 ? kNdim : kMaxDims][kNodes];
  T weight[kNdim > 0 ? kNdim : kMaxDims][kNodes];
  bool valid[kNdim > 0 ? kNdim : kMaxDims][kNodes];
  const int nan_axis = PointNodes<T, kOrder>(g, coords, at, ndim, offset, weight, valid);
  if (nan_axis >= 0) {
    visit(int64_t{0}, weight[nan_axis][0]);
    return;
  }
  if constexpr (kNdim > 0) {
    VisitTensorProduct<T, kNodes, kNdim, 0>(offset, weight, valid, int64_t{0}, T(1), visit);
  } else {
    // The (kOrder + 1)^ndim nodes of the tensor product, one digit per axis.
    int corners = 1;
    for (int a = 0; a < ndim; ++a) corners *= kNodes;
    for (int corner = 0; corner < corners; ++corner) {
      int64_t node = 0;
      T w = T(1);
      bool inside = true;
      int digits = corner;
      for (int a = 0; a < ndim; ++a) {
        const int k = digits % kNodes;
        digits /= kNodes;
        node += offset[a][k];
        w *= weight[a][k];
        inside = inside && valid[a][k];
      }
      if (inside) visit(node, w);
    }
  }
}

// The weighted sum of the nodes ForEachNode visits, for a rank known at
// compile time: summed axis by axis (a weight times the sum of the next
// axis' nodes), whose additions depend on each other a few deep rather than
// one sum through all (k + 1)^ndim nodes, several times faster on a CPU.
template <typename T, int kNodes, int kNdim, int kAxis>
XLABIND_HOST_DEVICE T SumTensorProduct(const int64_t (*offset)[kNodes], const T (*weight)[kNodes],
                                       const bool (*valid)[kNodes], const T* grid) {
  T sum = T(0);
  for (int k = 0; k < kNodes; ++k) {
    if (!valid[kAxis][k]) continue;  // outside the grid (constant mode)
    if constexpr (kAxis == kNdim - 1) {
      sum += weight[kAxis][k] * grid[offset[kAxis][k]];
    } else {
      sum += weight[kAxis][k] * SumTensorProduct<T, kNodes, kNdim, kAxis + 1>(
                                    offset, weight, valid, grid + offset[kAxis][k]);
    }
  }
  return sum;
}

// The point at `at`'s weighted sum of the grid nodes it reads (kNdim > 0):
// what summing ForEachNode's visits computes, cval's nodes left out alike; a
// NaN for a point whose value is NaN.
template <typename T, int kOrder, int kNdim>
XLABIND_HOST_DEVICE T SumNodes(const Geometry& g, const Coordinates<T>& coords, int64_t at,
                               const T* grid) {
  constexpr int kNodes = kOrder + 1;
  int64_t offset[kNdim][kNodes];
  T weight[kNdim][kNodes];
  bool valid[kNdim][kNodes];
  const int nan_axis = PointNodes<T, kOrder>(g, coords, at, kNdim, offset, weight, valid);
  if (nan_axis >= 0) return weight[nan_axis][0] * grid[0];
  return SumTensorProduct<T, kNodes, kNdim, 0>(offset, weight, valid, grid);
}

// Calls body(order, ndim) with both as std::integral_constant-like types the
// kernels instantiate on: orders 0 to 5, ranks 1-3 unrolled, others generic.
template <int kValue>
struct Constant {
  static constexpr int value = kValue;
};

template <typename Body>
auto DispatchKernel(const Geometry& g, Body&& body) {
  auto by_rank = [&](auto order) {
    switch (g.ndim) {
      case 1:
        return body(order, Constant<1>{});
      case 2:
        return body(order, Constant<2>{});
      case 3:
        return body(order, Constant<3>{});
      default:
        return body(order, Constant<0>{});
    }
  };
  switch (g.order) {
    case 0:
      return by_rank(Constant<0>{});
    case 1:
      return by_rank(Constant<1>{});
    case 2:
      return by_rank(Constant<2>{});
    case 3:
      return by_rank(Constant<3>{});
    case 4:
      return by_rank(Constant<4>{});
    default:
      return by_rank(Constant<5>{});
  }
}

// Offsets of batch element `b` (of the values) in the grid and the coordinates.
XLABIND_HOST_DEVICE void BatchOffsets(const Geometry& g, int64_t b, int64_t* grid_offset,
                                      int64_t* coord_offset) {
  int64_t grid = 0, coord = 0;
  for (int k = g.batch_dims - 1; k >= 0; --k) {
    const int64_t i = b % g.batch_shape[k];
    b /= g.batch_shape[k];
    grid += i * g.grid_batch_strides[k];
    coord += i * g.coord_batch_strides[k];
  }
  *grid_offset = grid;
  *coord_offset = coord;
}

}  // namespace xlabind::map_coordinates

#endif  // XLABIND_FFI_OPS_MAP_COORDINATES_INTERPOLATION_H_
