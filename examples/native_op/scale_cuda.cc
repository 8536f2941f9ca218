// example_scale on CUDA: the handler, compiled by the C++ toolchain, calls
// the launcher of scale_kernels.cu, compiled by nvcc, on XLA's stream.
#include <cstdint>

#include "scale_kernels.h"
#include "xlabind/native/errors.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
namespace native = xlabind::native;

static ffi::Error ScaleCuda(void* stream, ffi::AnyBuffer x,
                            ffi::Result<ffi::AnyBuffer> y, double factor) {
  if (x.element_type() != ffi::DataType::F32) {
    return native::InvalidArgument("example_scale (CUDA): float32 only");
  }
  const char* error = ExampleScaleLaunchF32(
      x.typed_data<float>(), y->typed_data<float>(),
      static_cast<int64_t>(x.element_count()), static_cast<float>(factor), stream);
  if (error[0] != '\0') return native::Internal("example_scale (CUDA): ", error);
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(ExampleScaleCuda, ScaleCuda,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<void*>>()  // XLA's stream
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<double>("factor"));
