#include "ffi/ops/spline_filter/cpu_handlers.h"

#include <algorithm>
#include <type_traits>

#include "xlabind/native/dtype_dispatch.h"
#include "xlabind/native/errors.h"
#include "xlabind/native/parallel_for.h"
#include "xlabind/native/scratch.h"
#include "ffi/ops/spline_filter/filter_call.h"
#include "ffi/ops/spline_filter/line_filter.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind::spline_filter {
namespace {
namespace ffi = xla::ffi;

// Values per thread below which threads do not pay.
constexpr int64_t kGrainValues = 1 << 15;
// Lines filtered side by side (line_filter.h): two AVX2 vectors of doubles.
constexpr int kBlockLanes = 8;

// Filters (or transposes) lines [begin, end) of `lines`, kBlockLanes at a
// time where they lie a fixed step apart: side by side in memory (the lines
// of an earlier axis), or one row after the other (the last axis); the rest
// one at a time.
template <bool kTranspose>
void FilterLines(const FilterCall& call, const AxisLines& lines, double* work, int64_t begin,
                 int64_t end, const double* weights) {
  for (int64_t k = begin; k < end;) {
    const bool rows = lines.stride == 1;
    if (k + kBlockLanes <= end && (rows || k % lines.stride + kBlockLanes <= lines.stride)) {
      const LineBlock<kBlockLanes> block{work + lines.Start(k), lines.length, lines.stride,
                                         rows ? lines.length : 1};
      if constexpr (kTranspose) {
        FilterLineTranspose(block, call.order, call.boundary, weights);
      } else {
        FilterLine(block, call.order, call.boundary);
      }
      k += kBlockLanes;
    } else {
      const Line line{work + lines.Start(k), lines.length, lines.stride, 0};
      if constexpr (kTranspose) {
        FilterLineTranspose(line, call.order, call.boundary, weights);
      } else {
        FilterLine(line, call.order, call.boundary);
      }
      ++k;
    }
  }
}

// Filters (or transposes) every line along each axis of `work` (doubles,
// row-major), one axis after the other, the lines of an axis in parallel.
// The transpose's weights are made once per axis (weights: scratch for the
// longest axis' table).
void FilterAxes(ffi::ThreadPool* pool, const FilterCall& call, double* work, bool transpose,
                double* weights) {
  const int count = static_cast<int>(call.axes.size());
  for (int k = 0; k < count; ++k) {
    const AxisLines& lines = call.axes[transpose ? count - 1 - k : k];
    if (lines.length < 2 || lines.count == 0) continue;
    if (transpose) TransposeWeights(lines.length, call.order, call.boundary, weights);
    // Whole blocks per chunk where the lines allow.
    const int64_t grain =
        std::max<int64_t>(1, kGrainValues / lines.length / kBlockLanes) * kBlockLanes;
    native::ParallelChunks(pool, lines.count, grain, grain, [&](int, int64_t begin, int64_t end) {
      if (transpose) {
        FilterLines<true>(call, lines, work, begin, end, weights);
      } else {
        FilterLines<false>(call, lines, work, begin, end, nullptr);
      }
    });
  }
}

ffi::Error Run(const char* op, ffi::ThreadPool& pool, ffi::AnyBuffer x,
               ffi::Result<ffi::AnyBuffer> y, int64_t order, int64_t boundary,
               ffi::Span<const int64_t> axes, bool transpose) {
  FilterCall call;
  XLABIND_RETURN_IF_ERROR(ReadFilterCall(op, x, *y, order, boundary, axes, &call));
  return native::DispatchFloating(op, x.element_type(), [&](auto zero) -> ffi::Error {
    using T = decltype(zero);
    const T* in = x.typed_data<T>();
    T* out = y->typed_data<T>();
    // Doubles throughout: the result itself for float64, scratch for float32.
    native::Scratch scratch;
    double* work;
    if constexpr (std::is_same_v<T, double>) {
      work = out;
    } else {
      XLABIND_ASSIGN_OR_RETURN(work, scratch.Allocate<double>(op, call.size));
    }
    if (static_cast<const void*>(in) != static_cast<const void*>(work)) {
      std::copy(in, in + call.size, work);
    }
    double* weights = nullptr;
    if (transpose) {
      int64_t longest = 0;
      for (const AxisLines& lines : call.axes) longest = std::max(longest, lines.length);
      XLABIND_ASSIGN_OR_RETURN(
          weights, scratch.Allocate<double>(op, 2 * PolesOf(static_cast<int>(order)).count *
                                                    std::max<int64_t>(longest, 1)));
    }
    FilterAxes(&pool, call, work, transpose, weights);
    if constexpr (!std::is_same_v<T, double>) {
      for (int64_t i = 0; i < call.size; ++i) out[i] = static_cast<T>(work[i]);
    }
    return ffi::Error::Success();
  });
}

ffi::Error SplineFilter(ffi::ThreadPool pool, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y,
                        int64_t order, int64_t boundary, ffi::Span<const int64_t> axes) {
  return Run("xlabind_spline_filter", pool, x, y, order, boundary, axes, false);
}

ffi::Error SplineFilterTranspose(ffi::ThreadPool pool, ffi::AnyBuffer x,
                                 ffi::Result<ffi::AnyBuffer> y, int64_t order, int64_t boundary,
                                 ffi::Span<const int64_t> axes) {
  return Run("xlabind_spline_filter_transpose", pool, x, y, order, boundary, axes, true);
}

}  // namespace
}  // namespace xlabind::spline_filter

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    XlabindSplineFilterCpu, xlabind::spline_filter::SplineFilter,
    xlabind::spline_filter::BindFilter(xla::ffi::Ffi::Bind().Ctx<xla::ffi::ThreadPool>()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    XlabindSplineFilterTransposeCpu, xlabind::spline_filter::SplineFilterTranspose,
    xlabind::spline_filter::BindFilter(xla::ffi::Ffi::Bind().Ctx<xla::ffi::ThreadPool>()));
