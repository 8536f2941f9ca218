// Calls a handler body with the C++ type of a buffer's element type.
//
//   return DispatchFloating("my_op", x.element_type(), [&](auto zero) {
//     using T = decltype(zero);
//     ...;
//     return ffi::Error::Success();
//   });
#ifndef XLABIND_FFI_NATIVE_DTYPE_DISPATCH_H_
#define XLABIND_FFI_NATIVE_DTYPE_DISPATCH_H_

#include "xlabind/native/dtype_names.h"
#include "xlabind/native/errors.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind::native {

// Calls `body` with a value of the C++ type of a floating element type.
//
// Args:
//   op: the operation's name, which an error message starts with.
//   type: the element type (`buffer.element_type()`).
//   body: a generic lambda; called with float{} for F32, double{} for F64.
// Returns:
//   What `body` returns, or an InvalidArgument error naming `op` and the type
//   for any other element type.
// Example:
//   return DispatchFloating("my_op", x.element_type(), [&](auto zero) {
//     using T = decltype(zero);
//     return Scale<T>(x.typed_data<T>(), n);
//   });
template <typename Body>
xla::ffi::Error DispatchFloating(const char* op, xla::ffi::DataType type, Body&& body) {
  switch (type) {
    case xla::ffi::DataType::F32:
      return body(float{});
    case xla::ffi::DataType::F64:
      return body(double{});
    default:
      return InvalidArgument(op, ": supports float32 and float64, got ", DtypeDescription(type));
  }
}

}  // namespace xlabind::native

#endif  // XLABIND_FFI_NATIVE_DTYPE_DISPATCH_H_
