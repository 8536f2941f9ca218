// What the CPU handlers of map_coordinates (cpu_gather_handler.cc, the values;
// cpu_scatter_handler.cc, the transpose) walk points with: the interior cells
// of orders 0 and 1, the runs of consecutive points of one batch element, the
// kernel's compile-time shape and XLA's thread pool. Two files, so the two
// handlers' many kernel instantiations compile in parallel.
#ifndef XLABIND_FFI_OPS_MAP_COORDINATES_CPU_POINT_LOOPS_H_
#define XLABIND_FFI_OPS_MAP_COORDINATES_CPU_POINT_LOOPS_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "ffi/ops/map_coordinates/geometry.h"
#include "ffi/ops/map_coordinates/interpolation.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind::map_coordinates::cpu {
namespace ffi = xla::ffi;

// Points per thread below which threads do not pay.
constexpr int64_t kGrainPoints = 1 << 15;
// Points a thread takes at a time (native::ParallelChunks).
constexpr int64_t kChunkPoints = 1 << 14;

// The interpolation cell of a point strictly inside the grid, for order 1:
// offset of its first node and, per axis, the weights of its two nodes. There
// every boundary mode is the identity, so the 2^ndim nodes sit at fixed
// offsets from the first: no per-node index arithmetic, no validity checks.
// That is most points of a typical call, and several times faster than the
// general path.
template <typename T, int kNdim>
struct Cell {
  int64_t first;
  T weight[kNdim][2];

  // Whether the point lies inside; fills the cell if so.
  bool Load(const Geometry& g, const Coordinates<T>& coords, int64_t at) {
    first = 0;
    for (int a = 0; a < kNdim; ++a) {
      const T c = coords.axis[a][at];
      const T lower = FloorOf(c);
      // Compared as floats first: NaN, infinities and huge values fail here.
      if (!(lower >= T(0) && lower + T(1) < static_cast<T>(g.grid_shape[a])) ||
          g.derivative[a] > 1) {
        return false;
      }
      const int64_t low = static_cast<int64_t>(lower);
      if (low + 1 >= g.grid_shape[a]) return false;  // rounding in float32 near 2^24
      first += low * g.grid_strides[a];
      const T t = c - lower;
      weight[a][0] = g.derivative[a] ? T(-1) : T(1) - t;
      weight[a][1] = g.derivative[a] ? T(1) : t;
    }
    return true;
  }

  // The weighted sum of the cell's nodes, axis by axis (nested lerps).
  template <int kAxis = 0>
  T Sum(const Geometry& g, const T* grid) const {
    if constexpr (kAxis == kNdim - 1) {
      return weight[kAxis][0] * grid[0] + weight[kAxis][1] * grid[g.grid_strides[kAxis]];
    } else {
      return weight[kAxis][0] * Sum<kAxis + 1>(g, grid) +
             weight[kAxis][1] * Sum<kAxis + 1>(g, grid + g.grid_strides[kAxis]);
    }
  }

  // Adds `value` times each node's weight into the cell's nodes.
  template <int kAxis = 0>
  void Add(const Geometry& g, T* grid, T value) const {
    if constexpr (kAxis == kNdim - 1) {
      grid[0] += weight[kAxis][0] * value;
      grid[g.grid_strides[kAxis]] += weight[kAxis][1] * value;
    } else {
      Add<kAxis + 1>(g, grid, weight[kAxis][0] * value);
      Add<kAxis + 1>(g, grid + g.grid_strides[kAxis], weight[kAxis][1] * value);
    }
  }
};

// Order 0's one node, for a point whose node (lax.round of each coordinate)
// lies inside on every axis: there, too, every mode is the identity. The
// derivatives of order 0's weights are 0, which the general path gives.
template <typename T, int kNdim>
struct NearestCell {
  int64_t first;

  bool Load(const Geometry& g, const Coordinates<T>& coords, int64_t at) {
    first = 0;
    for (int a = 0; a < kNdim; ++a) {
      const T c = coords.axis[a][at];
      // Compared as floats first: NaN, infinities and huge values fail here.
      if (!(c >= T(0) && c < static_cast<T>(g.grid_shape[a])) || g.derivative[a] != 0) {
        return false;
      }
      const double index = RoundHalfAwayFromZero(static_cast<double>(c));
      if (index >= static_cast<double>(g.grid_shape[a])) return false;
      first += static_cast<int64_t>(index) * g.grid_strides[a];
    }
    return true;
  }
};

// Calls run(first value index, grid offset, first offset in the coordinate
// arrays, count) for the runs of consecutive points, one per batch element,
// that cover values [begin, end).
template <typename Run>
void ForRuns(const Geometry& g, int64_t begin, int64_t end, Run&& run) {
  if (begin >= end) return;  // also: no points at all (g.points may be 0)
  int64_t b = begin / g.points, p = begin % g.points;
  for (int64_t i = begin; i < end; ++b, p = 0) {
    int64_t grid_offset, coord_offset;
    BatchOffsets(g, b, &grid_offset, &coord_offset);
    const int64_t count = std::min(g.points - p, end - i);
    run(i, grid_offset, coord_offset + p, count);
    i += count;
  }
}

// Calls body(order, rank, fast) with the kernel's compile-time shape: whether
// an interior fast path applies (1 to 3 dimensions; NearestCell for order 0,
// Cell for order 1, SplineCell for orders 2 to 5).
template <typename Body>
void DispatchCpu(const Geometry& g, Body&& body) {
  DispatchKernel(g, [&](auto order, auto rank) {
    constexpr bool kFast = decltype(rank)::value > 0;
    body(order, rank, std::integral_constant<bool, kFast>{});
  });
}

// XLA's intra-op pool, unless XLABIND_MAP_COORDINATES_OWN_THREADS is set: a
// switch for measuring the two against each other (tools/benchmarks/), read
// on every call so one process can time both.
inline ffi::ThreadPool* PoolOrOwnThreads(ffi::ThreadPool& pool) {
  return std::getenv("XLABIND_MAP_COORDINATES_OWN_THREADS") == nullptr ? &pool : nullptr;
}

}  // namespace xlabind::map_coordinates::cpu

#endif  // XLABIND_FFI_OPS_MAP_COORDINATES_CPU_POINT_LOOPS_H_
