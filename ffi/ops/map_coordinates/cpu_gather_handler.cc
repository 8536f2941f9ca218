// map_coordinates on the CPU, the values: each point's nodes gathered and
// weighted (cpu_handlers.h).
#include "ffi/ops/map_coordinates/cpu_handlers.h"

#include <algorithm>
#include <type_traits>

#include "xlabind/native/dtype_dispatch.h"
#include "xlabind/native/errors.h"
#include "xlabind/native/parallel_for.h"
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

// Every value in [begin, end), from its point's nodes, by the kernel of one
// compile-time shape. Out of line, so that each shape's loop is compiled once
// and optimized on its own, whichever of ParallelChunks' paths (one thread or
// several) calls it.
template <typename T, int kOrder, int kNdim, bool kFast>
[[gnu::noinline]] void GatherRange(const Geometry& geometry, bool vector, const T* grid,
                                   const Coordinates<T>& coords, T* values, int64_t begin,
                                   int64_t end) {
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
          GatherSplineRunAvx2<T, kOrder, kNdim>(g, grid_b, run_coords, values + i, count, point);
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
}

template <typename T>
void Gather(ffi::ThreadPool* pool, const Geometry& geometry, const T* grid,
            const Coordinates<T>& coords, T* values) {
  // The vector kernels of the call's order (0 and 1: cpu_avx2_kernels.h; 2 to 5:
  // cpu_avx2_spline_kernels.h), where they apply.
  const bool vector = Avx2KernelsApply(geometry) || SplineAvx2KernelsApply(geometry);
  // The shape is dispatched in each chunk rather than around ParallelChunks:
  // around it, each of the 48 shapes carried its own copy of the thread-pool
  // code and of its loop, about half of this file's compile time.
  native::ParallelChunks(
      pool, geometry.batch * geometry.points, kGrainPoints, kChunkPoints,
      [&](int, int64_t begin, int64_t end) {
        DispatchCpu(geometry, [&](auto order, auto rank, auto fast) {
          GatherRange<T, decltype(order)::value, decltype(rank)::value, decltype(fast)::value>(
              geometry, vector, grid, coords, values, begin, end);
        });
      });
}

ffi::Error MapCoordinates(ffi::ThreadPool pool, ffi::RemainingArgs args,
                          ffi::Result<ffi::AnyBuffer> values, int64_t order, int64_t mode,
                          ffi::Span<const int64_t> derivative) {
  constexpr const char* kOp = "xlabind_map_coordinates";
  Call call;
  XLABIND_RETURN_IF_ERROR(ReadGather(kOp, args, *values, order, mode, derivative, &call));
  return native::DispatchFloating(kOp, call.grid->element_type(), [&](auto zero) {
    using T = decltype(zero);
    Gather<T>(PoolOrOwnThreads(pool), call.geometry, call.grid->typed_data<T>(),
              call.CoordinatePointers<T>(), call.values->typed_data<T>());
    return ffi::Error::Success();
  });
}

}  // namespace
}  // namespace xlabind::map_coordinates::cpu

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    XlabindMapCoordinatesCpu, xlabind::map_coordinates::cpu::MapCoordinates,
    xlabind::map_coordinates::BindCall(xla::ffi::Ffi::Bind().Ctx<xla::ffi::ThreadPool>()));
