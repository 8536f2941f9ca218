#include "ffi/ops/map_coordinates/cuda_handlers.h"

#include "xlabind/native/dtype_dispatch.h"
#include "xlabind/native/errors.h"
#include "ffi/ops/map_coordinates/cuda_kernels.h"
#include "ffi/ops/map_coordinates/geometry.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind::map_coordinates {
namespace {
namespace ffi = xla::ffi;

ffi::Error Launched(const char* op, const char* status) {
  if (status == nullptr || status[0] == '\0') return ffi::Error::Success();
  return native::Internal(op, ": CUDA error: ", status);
}

ffi::Error MapCoordinates(void* stream, ffi::RemainingArgs args, ffi::Result<ffi::AnyBuffer> values,
                          int64_t order, int64_t mode, ffi::Span<const int64_t> derivative) {
  constexpr const char* kOp = "xlabind_map_coordinates (CUDA)";
  Call call;
  XLABIND_RETURN_IF_ERROR(ReadGather(kOp, args, *values, order, mode, derivative, &call));
  const Geometry& g = call.geometry;
  return native::DispatchFloating(kOp, call.grid->element_type(), [&](auto zero) {
    using T = decltype(zero);
    const Coordinates<T> coords = call.CoordinatePointers<T>();
    if constexpr (sizeof(T) == 4) {
      return Launched(kOp, XlabindMapCoordinatesGatherF32(&g, call.grid->typed_data<T>(), &coords,
                                                          call.values->typed_data<T>(), stream));
    } else {
      return Launched(kOp, XlabindMapCoordinatesGatherF64(&g, call.grid->typed_data<T>(), &coords,
                                                          call.values->typed_data<T>(), stream));
    }
  });
}

ffi::Error MapCoordinatesTranspose(void* stream, ffi::RemainingArgs args,
                                   ffi::Result<ffi::AnyBuffer> grid, int64_t order, int64_t mode,
                                   ffi::Span<const int64_t> derivative) {
  constexpr const char* kOp = "xlabind_map_coordinates_transpose (CUDA)";
  Call call;
  XLABIND_RETURN_IF_ERROR(ReadScatter(kOp, args, *grid, order, mode, derivative, &call));
  const Geometry& g = call.geometry;
  const auto count = static_cast<long long>(call.grid->element_count());
  return native::DispatchFloating(kOp, call.grid->element_type(), [&](auto zero) {
    using T = decltype(zero);
    const Coordinates<T> coords = call.CoordinatePointers<T>();
    if constexpr (sizeof(T) == 4) {
      return Launched(kOp,
                      XlabindMapCoordinatesScatterF32(&g, &coords, call.values->typed_data<T>(),
                                                      call.grid->typed_data<T>(), count, stream));
    } else {
      return Launched(kOp,
                      XlabindMapCoordinatesScatterF64(&g, &coords, call.values->typed_data<T>(),
                                                      call.grid->typed_data<T>(), count, stream));
    }
  });
}

}  // namespace
}  // namespace xlabind::map_coordinates

XLA_FFI_DEFINE_HANDLER_SYMBOL(XlabindMapCoordinatesCuda, xlabind::map_coordinates::MapCoordinates,
                              xlabind::map_coordinates::BindCall(
                                  xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<void*>>()),
                              {xla::ffi::Traits::kCmdBufferCompatible});

XLA_FFI_DEFINE_HANDLER_SYMBOL(XlabindMapCoordinatesTransposeCuda,
                              xlabind::map_coordinates::MapCoordinatesTranspose,
                              xlabind::map_coordinates::BindCall(
                                  xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<void*>>()),
                              {xla::ffi::Traits::kCmdBufferCompatible});
