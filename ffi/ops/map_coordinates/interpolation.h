// The arithmetic of map_coordinates, shared by the CPU handlers (C++) and the
// CUDA kernels (nvcc): how a coordinate becomes grid indices and weights, and
// how each boundary mode maps an index into the grid. It follows
// jax.scipy.ndimage.map_coordinates exactly (orders 0 and 1; modes constant,
// nearest, wrap, mirror, reflect), with the interpolation weights optionally
// differentiated along each axis. Plain C++ with no library calls, so nvcc and
// the C++ toolchain compile it alike.
#ifndef XLABIND_FFI_OPS_MAP_COORDINATES_INTERPOLATION_H_
#define XLABIND_FFI_OPS_MAP_COORDINATES_INTERPOLATION_H_

#include <cstdint>

#if defined(__CUDACC__)
#define XLABIND_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define XLABIND_HOST_DEVICE inline __attribute__((always_inline))
#endif

namespace xlabind::map_coordinates {

// The most spatial dimensions a grid may have.
constexpr int kMaxDims = 8;
// The most leading batch dimensions (one per vmap level).
constexpr int kMaxBatchDims = 8;

enum Mode : int32_t { kConstant = 0, kNearest = 1, kWrap = 2, kMirror = 3, kReflect = 4 };

// Everything a kernel needs about one call; plain data, passed by value. The
// coordinates are ndim arrays of one shape, (*coordinate batch, points).
struct Geometry {
  int32_t ndim;        // spatial dimensions of the grid
  int32_t batch_dims;  // leading batch dimensions of grid, coordinates and values
  int32_t order;       // 0 (nearest) or 1 (linear)
  int32_t mode;        // Mode
  int64_t points;      // coordinates per batch element
  int64_t batch;       // batch elements (product of batch_shape)
  int64_t grid_size;   // grid elements per batch element
  int64_t grid_shape[kMaxDims];
  int64_t grid_strides[kMaxDims];  // in elements, within one batch element
  int32_t derivative[kMaxDims];    // order of the derivative of the weights, per axis
  int64_t batch_shape[kMaxBatchDims];  // of the values (the broadcast of the other two)
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

XLABIND_HOST_DEVICE int64_t FloorMod(int64_t a, int64_t b) { return a - FloorDiv(a, b) * b; }

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

// Maps `index` into [0, size) by `mode`; false when constant mode leaves it out.
XLABIND_HOST_DEVICE bool FixIndex(int64_t& index, int64_t size, int32_t mode) {
  switch (mode) {
    case kConstant:
      return index >= 0 && index < size;
    case kNearest:
      index = index < 0 ? 0 : (index >= size ? size - 1 : index);
      return true;
    case kWrap:
      index = FloorMod(index, size);
      return true;
    case kMirror:
      index = Mirror(index, size);
      return true;
    default:
      index = Reflect(index, size);
      return true;
  }
}

template <typename T>
XLABIND_HOST_DEVICE T FloorOf(T x) {
  const T truncated = static_cast<T>(static_cast<int64_t>(x));
  return truncated > x ? truncated - T(1) : truncated;
}

// The grid nodes coordinate `c` touches along one axis (1 for order 0, 2 for
// order 1): their offsets (index * stride), their weights differentiated
// `derivative` times, and whether they lie inside the grid (constant mode).
template <typename T, int kOrder>
XLABIND_HOST_DEVICE void AxisNodes(T c, int64_t size, int64_t stride, int32_t mode,
                                   int32_t derivative, int64_t* offset, T* weight, bool* valid) {
  if (kOrder == 0) {
    // Round half away from zero, as lax.round does.
    const T rounded = c >= T(0) ? FloorOf(c + T(0.5)) : -FloorOf(-c + T(0.5));
    int64_t index = static_cast<int64_t>(rounded);
    valid[0] = FixIndex(index, size, mode);
    offset[0] = index * stride;
    weight[0] = derivative == 0 ? T(1) : T(0);
    return;
  }
  const T lower = FloorOf(c);
  const T upper_weight = c - lower;
  int64_t low = static_cast<int64_t>(lower), high = low + 1;
  valid[0] = FixIndex(low, size, mode);
  valid[1] = FixIndex(high, size, mode);
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
}

// Calls visit(grid offset, weight) for every grid node the point at `at` of
// the coordinate arrays touches with a nonzero weight; nodes outside the grid
// (constant mode) contribute zero and are skipped. kNdim > 0 fixes the grid's
// rank at compile time (the common 1-, 2- and 3-D cases unroll); 0 reads it
// from the geometry.
template <typename T, int kOrder, int kNdim, typename Visit>
XLABIND_HOST_DEVICE void ForEachNode(const Geometry& g, const Coordinates<T>& coords, int64_t at,
                                     Visit&& visit) {
  constexpr int kNodes = kOrder + 1;
  const int ndim = kNdim > 0 ? kNdim : g.ndim;
  int64_t offset[kMaxDims][kNodes];
  T weight[kMaxDims][kNodes];
  bool valid[kMaxDims][kNodes];
  for (int a = 0; a < ndim; ++a) {
    AxisNodes<T, kOrder>(coords.axis[a][at], g.grid_shape[a], g.grid_strides[a], g.mode,
                         g.derivative[a], offset[a], weight[a], valid[a]);
  }
  const int corners = kOrder == 0 ? 1 : 1 << ndim;
  for (int corner = 0; corner < corners; ++corner) {
    int64_t node = 0;
    T w = T(1);
    bool inside = true;
    for (int a = 0; a < ndim; ++a) {
      const int k = kOrder == 0 ? 0 : (corner >> a) & 1;
      node += offset[a][k];
      w *= weight[a][k];
      inside = inside && valid[a][k];
    }
    if (inside && w != T(0)) visit(node, w);
  }
}

// Calls body(order, ndim) with both as std::integral_constant-like types the
// kernels instantiate on: orders 0 and 1, ranks 1-3 unrolled, others generic.
template <int kValue>
struct Constant {
  static constexpr int value = kValue;
};

template <typename Body>
auto DispatchKernel(const Geometry& g, Body&& body) {
  auto by_rank = [&](auto order) {
    switch (g.ndim) {
      case 1: return body(order, Constant<1>{});
      case 2: return body(order, Constant<2>{});
      case 3: return body(order, Constant<3>{});
      default: return body(order, Constant<0>{});
    }
  };
  return g.order == 0 ? by_rank(Constant<0>{}) : by_rank(Constant<1>{});
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
