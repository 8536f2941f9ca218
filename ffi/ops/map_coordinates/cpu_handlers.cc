#include "ffi/ops/map_coordinates/cpu_handlers.h"

#include <algorithm>
#include <cstdlib>
#include <type_traits>

#include "xlabind/native/dtype_dispatch.h"
#include "xlabind/native/errors.h"
#include "xlabind/native/parallel_for.h"
#include "xlabind/native/scratch.h"
#include "xlabind/native/shapes.h"
#include "ffi/ops/map_coordinates/cpu_avx2_kernels.h"
#include "ffi/ops/map_coordinates/cpu_avx2_spline_kernels.h"
#include "ffi/ops/map_coordinates/geometry.h"
#include "ffi/ops/map_coordinates/interpolation.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind::map_coordinates {
namespace {
namespace ffi = xla::ffi;

// Points per thread below which threads do not pay.
constexpr int64_t kGrainPoints = 1 << 15;
// Points a thread takes at a time (native::ParallelChunks).
constexpr int64_t kChunkPoints = 1 << 14;
// The transpose gives each thread a private grid to add into; above this many
// bytes for all of them together it runs on one thread instead.
constexpr int64_t kPrivateGridBudget = int64_t{256} << 20;
// A private grid costs its fill, its share of the reduction and, past
// malloc's mmap threshold, the page faults of a fresh allocation every call:
// on the benchmark's machine about what splitting 3 node adds saves
// (tools/benchmarks/roofline.py, 256^3 grids: 2^20 points of order 1 took
// 245 ms on one thread and 388 ms on two private grids; of order 3, 608 ms
// and 533 ms). Fewer node adds than that per private element: one thread.
constexpr int64_t kNodeAddsPerPrivateElement = 3;

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
  XLABIND_HOST_DEVICE bool Load(const Geometry& g, const Coordinates<T>& coords, int64_t at) {
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

  XLABIND_HOST_DEVICE bool Load(const Geometry& g, const Coordinates<T>& coords, int64_t at) {
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

// One value the general way: the interior fast path where it applies, else
// every node through the boundary mode.
template <typename T, int kOrder, int kNdim, bool kFast>
XLABIND_HOST_DEVICE T GatherPoint(const Geometry& g, const T* grid, const Coordinates<T>& coords,
                                int64_t at) {
  if constexpr (kFast && kOrder == 0) {
    NearestCell<T, kNdim> cell;
    if (cell.Load(g, coords, at)) return grid[cell.first];
  } else if constexpr (kFast && kOrder == 1) {
    Cell<T, kNdim> cell;
    if (cell.Load(g, coords, at)) return cell.Sum(g, grid + cell.first);
  } else if constexpr (kFast) {
    SplineCell<T, kOrder, kNdim> cell;
    if (cell.Load(g, coords, at)) return cell.Sum(g, grid + cell.first);
  }
  if constexpr (kNdim > 0) {
    return SumNodes<T, kOrder, kNdim>(g, coords, at, grid);
  } else {
    T sum = T(0);
    ForEachNode<T, kOrder, kNdim>(g, coords, at,
                                  [&](int64_t node, T weight) { sum += weight * grid[node]; });
    return sum;
  }
}

template <typename T>
void Gather(ffi::ThreadPool* pool, const Geometry& geometry, const T* grid,
            const Coordinates<T>& coords, T* values) {
  // The vector kernels of the call's order (0 and 1: cpu_avx2_kernels.h; 2 to 5:
  // cpu_avx2_spline_kernels.h), where they apply.
  const bool vector = Avx2KernelsApply(geometry) || SplineAvx2KernelsApply(geometry);
  DispatchCpu(geometry, [&](auto order, auto rank, auto fast) {
    constexpr int kOrder = decltype(order)::value, kNdim = decltype(rank)::value;
    constexpr bool kFast = decltype(fast)::value;
    native::ParallelChunks(pool, geometry.batch * geometry.points, kGrainPoints, kChunkPoints,
                           [&](int, int64_t begin, int64_t end) {
      // A copy of its own lets the compiler keep the geometry in registers: it
      // cannot know that writing the values leaves a shared one unchanged.
      const Geometry g = geometry;
      ForRuns(g, begin, end, [&](int64_t i, int64_t grid_offset, int64_t at, int64_t count) {
        const T* grid_b = grid + grid_offset;
        if constexpr (kFast) {  // 1 to 3 dimensions
          if (vector) {
            auto point = [&](int64_t k) {
              values[i + k] = GatherPoint<T, kOrder, kNdim, kFast>(g, grid_b, coords, at + k);
            };
            const T* run_coords[kNdim];
            for (int a = 0; a < kNdim; ++a) run_coords[a] = coords.axis[a] + at;
            if constexpr (kOrder == 0) {
              GatherNearestRunAvx2<T, kNdim>(g, grid_b, run_coords, values + i, count, point);
            } else if constexpr (kOrder == 1) {
              GatherRunAvx2<T, kNdim>(g, grid_b, run_coords, values + i, count, point);
            } else {
              GatherSplineRunAvx2<T, kOrder, kNdim>(g, grid_b, run_coords, values + i, count,
                                                    point);
            }
            return;
          }
        }
        // Written out rather than a call of `point`, which the compiler
        // would not inline: it is also the vector loop's (rare) way out.
        for (int64_t k = 0; k < count; ++k) {
          values[i + k] = GatherPoint<T, kOrder, kNdim, kFast>(g, grid_b, coords, at + k);
        }
      });
    });
  });
}

// Adds one value's cotangent into the grid nodes it was interpolated from.
template <typename T, int kOrder, int kNdim, bool kFast>
XLABIND_HOST_DEVICE void ScatterPoint(const Geometry& g, T* grid, const Coordinates<T>& coords,
                                      int64_t at, T ct) {
  // No shortcut for a zero cotangent: a NaN weight (a NaN coordinate) makes it
  // NaN, as in jax.
  if constexpr (kFast && kOrder == 0) {
    NearestCell<T, kNdim> cell;
    if (cell.Load(g, coords, at)) {
      grid[cell.first] += ct;
      return;
    }
  } else if constexpr (kFast && kOrder == 1) {
    Cell<T, kNdim> cell;
    if (cell.Load(g, coords, at)) {
      cell.Add(g, grid + cell.first, ct);
      return;
    }
  } else if constexpr (kFast) {
    SplineCell<T, kOrder, kNdim> cell;
    if (cell.Load(g, coords, at)) {
      cell.Add(g, grid + cell.first, ct);
      return;
    }
  }
  ForEachNode<T, kOrder, kNdim>(g, coords, at,
                                [&](int64_t node, T weight) { grid[node] += weight * ct; });
}

// Adds every value's cotangent in [begin, end) into the grid nodes it was
// interpolated from.
template <typename T>
void ScatterRange(const Geometry& geometry, const Coordinates<T>& coords, const T* cotangents,
                  T* grid, int64_t begin, int64_t end) {
  const Geometry g = geometry;  // in registers (see Gather)
  const bool vector = Avx2KernelsApply(g) || SplineAvx2KernelsApply(g);
  DispatchCpu(g, [&](auto order, auto rank, auto fast) {
    constexpr int kOrder = decltype(order)::value, kNdim = decltype(rank)::value;
    constexpr bool kFast = decltype(fast)::value;
    ForRuns(g, begin, end, [&](int64_t i, int64_t grid_offset, int64_t at, int64_t count) {
      T* grid_b = grid + grid_offset;
      if constexpr (kFast) {  // 1 to 3 dimensions
        if (vector) {
          auto point = [&](int64_t k) {
            ScatterPoint<T, kOrder, kNdim, kFast>(g, grid_b, coords, at + k, cotangents[i + k]);
          };
          const T* run_coords[kNdim];
          for (int a = 0; a < kNdim; ++a) run_coords[a] = coords.axis[a] + at;
          if constexpr (kOrder == 0) {
            ScatterNearestRunAvx2<T, kNdim>(g, grid_b, run_coords, cotangents + i, count,
                                            point);
          } else if constexpr (kOrder == 1) {
            ScatterRunAvx2<T, kNdim>(g, grid_b, run_coords, cotangents + i, count, point);
          } else {
            ScatterSplineRunAvx2<T, kOrder, kNdim>(g, grid_b, run_coords, cotangents + i, count,
                                                   point);
          }
          return;
        }
      }
      for (int64_t k = 0; k < count; ++k) {
        ScatterPoint<T, kOrder, kNdim, kFast>(g, grid_b, coords, at + k, cotangents[i + k]);
      }
    });
  });
}

template <typename T>
ffi::Error Scatter(ffi::ThreadPool* pool, const Geometry& g, const Coordinates<T>& coords,
                   const T* cotangents, T* grid, int64_t grid_count) {
  // On every thread: a large result is fresh memory, and its page faults cost
  // more than the zeros (a 256^3 float64 grid: 32,768 of them a call).
  native::ParallelFor(pool, grid_count, kGrainPoints, [&](int, int64_t begin, int64_t end) {
    std::fill(grid + begin, grid + end, T(0));
  });
  const int64_t total = g.batch * g.points;
  const int shares = native::ThreadsFor(pool, total, kGrainPoints);
  int64_t node_adds = total;
  for (int a = 0; a < g.ndim; ++a) node_adds *= g.order + 1;
  if (shares == 1 || grid_count * static_cast<int64_t>(sizeof(T)) * shares > kPrivateGridBudget ||
      node_adds < kNodeAddsPerPrivateElement * grid_count * (shares - 1)) {
    ScatterRange(g, coords, cotangents, grid, 0, total);
    return ffi::Error::Success();
  }
  // Each share of the points is added into a grid of its own (equal shares,
  // not ParallelChunks: which share holds which point fixes the order of the
  // sums, so a gradient is the same bits every time, whichever thread runs
  // it); then the grids are summed, in parallel over grid elements.
  native::Scratch scratch;
  XLABIND_ASSIGN_OR_RETURN(T * partial,
                           scratch.Allocate<T>("xlabind_map_coordinates_transpose",
                                               static_cast<size_t>(grid_count) * (shares - 1)));
  native::ParallelFor(pool, total, kGrainPoints, [&](int share, int64_t begin, int64_t end) {
    T* into = share == 0 ? grid : partial + (share - 1) * grid_count;
    if (share > 0) std::fill(into, into + grid_count, T(0));  // zeroed where it is used
    ScatterRange(g, coords, cotangents, into, begin, end);
  });
  native::ParallelFor(pool, grid_count, kGrainPoints, [&](int, int64_t begin, int64_t end) {
    for (int part = 0; part < shares - 1; ++part) {
      const T* from = partial + part * grid_count;
      for (int64_t k = begin; k < end; ++k) grid[k] += from[k];
    }
  });
  return ffi::Error::Success();
}

// XLA's intra-op pool, unless XLABIND_MAP_COORDINATES_OWN_THREADS is set: a
// switch for measuring the two against each other (tools/benchmark.py), read
// on every call so one process can time both.
ffi::ThreadPool* PoolOrOwnThreads(ffi::ThreadPool& pool) {
  return std::getenv("XLABIND_MAP_COORDINATES_OWN_THREADS") == nullptr ? &pool : nullptr;
}

ffi::Error MapCoordinates(ffi::ThreadPool pool, ffi::RemainingArgs args,
                          ffi::Result<ffi::AnyBuffer> values,
                          int64_t order, int64_t mode, ffi::Span<const int64_t> derivative) {
  constexpr const char* kOp = "xlabind_map_coordinates";
  Call call;
  XLABIND_RETURN_IF_ERROR(ReadGather(kOp, args, *values, order, mode, derivative, &call));
  return native::DispatchFloating(kOp, call.grid->element_type(), [&](auto zero) {
    using T = decltype(zero);
    Gather<T>(PoolOrOwnThreads(pool), call.geometry, call.grid->typed_data<T>(),
              call.CoordinatePointers<T>(),
              call.values->typed_data<T>());
    return ffi::Error::Success();
  });
}

ffi::Error MapCoordinatesTranspose(ffi::ThreadPool pool, ffi::RemainingArgs args,
                                   ffi::Result<ffi::AnyBuffer> grid,
                                   int64_t order, int64_t mode,
                                   ffi::Span<const int64_t> derivative) {
  constexpr const char* kOp = "xlabind_map_coordinates_transpose";
  Call call;
  XLABIND_RETURN_IF_ERROR(ReadScatter(kOp, args, *grid, order, mode, derivative, &call));
  return native::DispatchFloating(kOp, call.grid->element_type(), [&](auto zero) {
    using T = decltype(zero);
    return Scatter<T>(PoolOrOwnThreads(pool), call.geometry, call.CoordinatePointers<T>(),
                      call.values->typed_data<T>(), call.grid->typed_data<T>(),
                      static_cast<int64_t>(call.grid->element_count()));
  });
}

}  // namespace
}  // namespace xlabind::map_coordinates

XLA_FFI_DEFINE_HANDLER_SYMBOL(XlabindMapCoordinatesCpu, xlabind::map_coordinates::MapCoordinates,
                              xlabind::map_coordinates::BindCall(
                                  xla::ffi::Ffi::Bind().Ctx<xla::ffi::ThreadPool>()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(XlabindMapCoordinatesTransposeCpu,
                              xlabind::map_coordinates::MapCoordinatesTranspose,
                              xlabind::map_coordinates::BindCall(
                                  xla::ffi::Ffi::Bind().Ctx<xla::ffi::ThreadPool>()));
