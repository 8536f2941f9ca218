#include "ffi/ops/spline_filter/cuda_handlers.h"

#include <type_traits>

#include "xlabind/native/dtype_dispatch.h"
#include "xlabind/native/errors.h"
#include "xlabind/native/scratch.h"
#include "ffi/ops/spline_filter/cuda_kernels.h"
#include "ffi/ops/spline_filter/filter_call.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind::spline_filter {
namespace {
namespace ffi = xla::ffi;

ffi::Error Launched(const char* op, const char* status) {
  if (status == nullptr || status[0] == '\0') return ffi::Error::Success();
  return native::Internal(op, ": CUDA error: ", status);
}

ffi::Error Run(const char* op, void* stream, ffi::ScratchAllocator& allocator, ffi::AnyBuffer x,
               ffi::Result<ffi::AnyBuffer> y, int64_t order, int64_t boundary,
               ffi::Span<const int64_t> axes, bool transpose) {
  FilterCall call;
  XLABIND_RETURN_IF_ERROR(ReadFilterCall(op, x, *y, order, boundary, axes, &call));
  native::Scratch scratch(&allocator);
  return native::DispatchFloating(op, x.element_type(), [&](auto zero) -> ffi::Error {
    using T = decltype(zero);
    // Doubles throughout: the result itself for float64, scratch for float32.
    double* work;
    if constexpr (std::is_same_v<T, double>) {
      work = y->typed_data<double>();
      XLABIND_RETURN_IF_ERROR(Launched(
          op, XlabindSplineFilterToDoubleF64(x.typed_data<double>(), work, call.size, stream)));
    } else {
      XLABIND_ASSIGN_OR_RETURN(work, scratch.Allocate<double>(op, call.size));
      XLABIND_RETURN_IF_ERROR(Launched(
          op, XlabindSplineFilterToDoubleF32(x.typed_data<float>(), work, call.size, stream)));
    }
    const int count = static_cast<int>(call.axes.size());
    for (int k = 0; k < count; ++k) {
      const AxisLines& lines = call.axes[transpose ? count - 1 - k : k];
      XLABIND_RETURN_IF_ERROR(Launched(
          op, XlabindSplineFilterLines(work, lines.length, lines.stride, lines.count, call.order,
                                       call.boundary, transpose ? 1 : 0, stream)));
    }
    if constexpr (!std::is_same_v<T, double>) {
      XLABIND_RETURN_IF_ERROR(Launched(
          op, XlabindSplineFilterFromDoubleF32(work, y->typed_data<float>(), call.size, stream)));
    }
    return ffi::Error::Success();
  });
}

ffi::Error SplineFilter(void* stream, ffi::ScratchAllocator allocator, ffi::AnyBuffer x,
                        ffi::Result<ffi::AnyBuffer> y, int64_t order, int64_t boundary,
                        ffi::Span<const int64_t> axes) {
  return Run("xlabind_spline_filter (CUDA)", stream, allocator, x, y, order, boundary, axes, false);
}

ffi::Error SplineFilterTranspose(void* stream, ffi::ScratchAllocator allocator, ffi::AnyBuffer x,
                                 ffi::Result<ffi::AnyBuffer> y, int64_t order, int64_t boundary,
                                 ffi::Span<const int64_t> axes) {
  return Run("xlabind_spline_filter_transpose (CUDA)", stream, allocator, x, y, order, boundary,
             axes, true);
}

}  // namespace
}  // namespace xlabind::spline_filter

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    XlabindSplineFilterCuda, xlabind::spline_filter::SplineFilter,
    xlabind::spline_filter::BindFilter(xla::ffi::Ffi::Bind()
                                           .Ctx<xla::ffi::PlatformStream<void*>>()
                                           .Ctx<xla::ffi::ScratchAllocator>()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    XlabindSplineFilterTransposeCuda, xlabind::spline_filter::SplineFilterTranspose,
    xlabind::spline_filter::BindFilter(xla::ffi::Ffi::Bind()
                                           .Ctx<xla::ffi::PlatformStream<void*>>()
                                           .Ctx<xla::ffi::ScratchAllocator>()));
