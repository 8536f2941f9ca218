// The map_coordinates CUDA kernels' loop bodies (ffi/ops/map_coordinates/
// cuda_point_bodies.h), run on the host: CPU FFI targets that take what the
// op's own targets take (geometry.h's BindCall) and run each index's body
// in turn, as the kernels' threads would, with every kernel shape the CUDA
// launchers dispatch to. tests/ops/test_cuda_bodies_on_host.py binds
// xlabind.ops.map_coordinates to them and compares with the CPU handlers.
//   native_api_cuda_gather_bodies    values (the gather kernel)
//   native_api_cuda_scatter_bodies   the transpose (the scatter kernel;
//                                    plain adds for its atomics)
#include <algorithm>
#include <cstdint>

#include "ffi/ops/map_coordinates/cuda_point_bodies.h"
#include "ffi/ops/map_coordinates/geometry.h"
#include "xlabind/native/dtype_dispatch.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
namespace mc = xlabind::map_coordinates;
namespace native = xlabind::native;

namespace {

struct HostAdd {
  template <typename T>
  void operator()(T* address, T amount) const {
    *address += amount;
  }
};

ffi::Error GatherBodies(ffi::RemainingArgs args, ffi::Result<ffi::AnyBuffer> values, int64_t order,
                        int64_t mode, ffi::Span<const int64_t> derivative) {
  constexpr const char* kOp = "native_api_cuda_gather_bodies";
  mc::Call call;
  XLABIND_RETURN_IF_ERROR(mc::ReadGather(kOp, args, *values, order, mode, derivative, &call));
  return native::DispatchFloating(kOp, call.grid->element_type(), [&](auto zero) {
    using T = decltype(zero);
    const mc::Geometry& g = call.geometry;
    const mc::Coordinates<T> coords = call.CoordinatePointers<T>();
    const T* grid = call.grid->typed_data<T>();
    T* out = call.values->typed_data<T>();
    mc::DispatchKernel(g, [&](auto kernel_order, auto rank) {
      constexpr int kOrder = decltype(kernel_order)::value, kNdim = decltype(rank)::value;
      for (int64_t i = 0; i < g.batch * g.points; ++i) {
        mc::GatherIndex<T, kOrder, kNdim>(g, grid, coords, out, i);
      }
    });
    return ffi::Error::Success();
  });
}

ffi::Error ScatterBodies(ffi::RemainingArgs args, ffi::Result<ffi::AnyBuffer> grid_out,
                         int64_t order, int64_t mode, ffi::Span<const int64_t> derivative) {
  constexpr const char* kOp = "native_api_cuda_scatter_bodies";
  mc::Call call;
  XLABIND_RETURN_IF_ERROR(mc::ReadScatter(kOp, args, *grid_out, order, mode, derivative, &call));
  return native::DispatchFloating(kOp, call.grid->element_type(), [&](auto zero) {
    using T = decltype(zero);
    const mc::Geometry& g = call.geometry;
    const mc::Coordinates<T> coords = call.CoordinatePointers<T>();
    T* grid = call.grid->typed_data<T>();
    std::fill(grid, grid + call.grid->element_count(), T(0));  // the launcher's memset
    const T* cotangents = call.values->typed_data<T>();
    mc::DispatchKernel(g, [&](auto kernel_order, auto rank) {
      constexpr int kOrder = decltype(kernel_order)::value, kNdim = decltype(rank)::value;
      for (int64_t i = 0; i < g.batch * g.points; ++i) {
        mc::ScatterIndex<T, kOrder, kNdim>(g, coords, cotangents, grid, i, HostAdd{});
      }
    });
    return ffi::Error::Success();
  });
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(NativeApiCudaGatherBodies, GatherBodies,
                              mc::BindCall(ffi::Ffi::Bind()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(NativeApiCudaScatterBodies, ScatterBodies,
                              mc::BindCall(ffi::Ffi::Bind()));
