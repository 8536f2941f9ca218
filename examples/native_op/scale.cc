// example_scale on the CPU: y = factor * x, for float32 and float64.
#include "xlabind/native/dtype_dispatch.h"
#include "xlabind/native/errors.h"
#include "xlabind/native/shapes.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
namespace native = xlabind::native;

static ffi::Error Scale(ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y,
                        double factor) {
  XLABIND_RETURN_IF_ERROR(
      native::CheckShape("example_scale", "y", *y, native::ShapeOf(x)));
  return native::DispatchFloating("example_scale", x.element_type(), [&](auto zero) {
    using T = decltype(zero);
    const T* in = x.typed_data<T>();
    T* out = y->typed_data<T>();
    for (size_t i = 0; i < x.element_count(); ++i) {
      out[i] = static_cast<T>(factor) * in[i];
    }
    return ffi::Error::Success();
  });
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(ExampleScaleCpu, Scale,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()     // x
                                  .Ret<ffi::AnyBuffer>()     // y
                                  .Attr<double>("factor"));  // a keyword argument
