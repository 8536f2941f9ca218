// map_coordinates on the CPU, the transpose: each value's cotangent added
// into the nodes it was interpolated from (cpu_handlers.h).
#include "ffi/ops/map_coordinates/cpu_handlers.h"

#include <algorithm>
#include <type_traits>

#include "xlabind/native/dtype_dispatch.h"
#include "xlabind/native/errors.h"
#include "xlabind/native/parallel_for.h"
#include "xlabind/native/scratch.h"
#include "xlabind/native/shapes.h"
#include "ffi/ops/map_coordinates/cpu_avx2_kernels.h"
#include "ffi/ops/map_coordinates/cpu_avx2_spline_kernels.h"
#include "ffi/ops/map_coordinates/cpu_point_loops.h"
#include "ffi/ops/map_coordinates/geometry.h"
#include "ffi/ops/map_coordinates/interpolation.h"
#include "ffi/ops/map_coordinates/points.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind::map_coordinates::cpu {
namespace {

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

// Adds every value's cotangent in [begin, end) into the grid nodes it was
// interpolated from, by the kernel of one compile-time shape. Out of line: each
// shape's loop compiles on its own (cpu_gather_handler.cc's GatherRange).
template <typename T, int kOrder, int kNdim, bool kFast>
[[gnu::noinline]] void ScatterRange(const Geometry& geometry, bool vector,
                                    const Coordinates<T>& coords, const T* cotangents, T* grid,
                                    int64_t begin, int64_t end) {
  const Geometry g = geometry;  // in registers (see GatherRange)
  ForRuns(g, begin, end, [&](int64_t i, int64_t grid_offset, int64_t at, int64_t count) {
    T* grid_b = grid + grid_offset;
    if constexpr (kFast) {  // 1 to 3 dimensions
      if (vector) {
        auto point = [&](int64_t k) {
          ScatterPoint<T, kOrder, kNdim, kFast>(g, grid_b, coords, at + k, cotangents[i + k],
                                                AddTo{});
        };
        const T* run_coords[kNdim];
        for (int a = 0; a < kNdim; ++a) run_coords[a] = coords.axis[a] + at;
        if constexpr (kOrder == 0) {
          ScatterNearestRunAvx2<T, kNdim>(g, grid_b, run_coords, cotangents + i, count, point);
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
      ScatterPoint<T, kOrder, kNdim, kFast>(g, grid_b, coords, at + k, cotangents[i + k], AddTo{});
    }
  });
}

// The same for the kernel of the call's shape.
template <typename T>
void ScatterRange(const Geometry& g, const Coordinates<T>& coords, const T* cotangents, T* grid,
                  int64_t begin, int64_t end) {
  const bool vector = Avx2KernelsApply(g) || SplineAvx2KernelsApply(g);
  DispatchCpu(g, [&](auto order, auto rank, auto fast) {
    ScatterRange<T, decltype(order)::value, decltype(rank)::value, decltype(fast)::value>(
        g, vector, coords, cotangents, grid, begin, end);
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

ffi::Error MapCoordinatesTranspose(ffi::ThreadPool pool, ffi::RemainingArgs args,
                                   ffi::Result<ffi::AnyBuffer> grid, int64_t order, int64_t mode,
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
}  // namespace xlabind::map_coordinates::cpu

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    XlabindMapCoordinatesTransposeCpu, xlabind::map_coordinates::cpu::MapCoordinatesTranspose,
    xlabind::map_coordinates::BindCall(xla::ffi::Ffi::Bind().Ctx<xla::ffi::ThreadPool>()));
