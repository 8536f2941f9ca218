// consumer_scale: y = factor * x, an XLA FFI handler for the CPU and one for
// CUDA (which calls the kernel in scale_kernels.cu), written with xlabind's
// helpers for handler authors.
#include <cstdint>

#include "xlabind/native/dtype_dispatch.h"
#include "xlabind/native/errors.h"
#include "xlabind/native/shapes.h"
#include "scale_kernels.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
namespace native = xlabind::native;

namespace {

ffi::Error ScaleCpu(ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y, double factor) {
  XLABIND_RETURN_IF_ERROR(native::CheckShape("consumer_scale", "y", *y, native::ShapeOf(x)));
  return native::DispatchFloating("consumer_scale", x.element_type(), [&](auto zero) {
    using T = decltype(zero);
    const T* in = x.typed_data<T>();
    T* out = y->typed_data<T>();
    for (size_t i = 0; i < x.element_count(); ++i) out[i] = static_cast<T>(factor) * in[i];
    return ffi::Error::Success();
  });
}

ffi::Error ScaleCuda(void* stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y,
                     double factor) {
  if (x.element_type() != ffi::DataType::F32) {
    return native::InvalidArgument("consumer_scale (CUDA): float32 only");
  }
  const char* error = ConsumerScaleLaunchF32(x.typed_data<float>(), y->typed_data<float>(),
                                             static_cast<int64_t>(x.element_count()),
                                             static_cast<float>(factor), stream);
  if (error[0] != '\0') return native::Internal("consumer_scale (CUDA): ", error);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(ConsumerScaleCpu, ScaleCpu,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<double>("factor"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(ConsumerScaleCuda, ScaleCuda,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<void*>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<double>("factor"));
