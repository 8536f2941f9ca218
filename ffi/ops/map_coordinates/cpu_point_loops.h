// What the CPU handlers of map_coordinates (cpu_gather_handler.cc, the values;
// cpu_scatter_handler.cc, the transpose) walk points with: the runs of
// consecutive points of one batch element, the kernel's compile-time shape
// and XLA's thread pool (one point's arithmetic: points.h). Two files, so the two
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
// LinearCell for order 1, SplineCell for orders 2 to 5: points.h).
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
