// Errors for XLA FFI handlers: messages built from parts, and early returns.
//
//   if (rank != 2) return InvalidArgument("my_op: x must have rank 2, got ", rank);
//   XLABIND_RETURN_IF_ERROR(CheckRank("my_op", "x", x, 2));
#ifndef XLABIND_FFI_NATIVE_ERRORS_H_
#define XLABIND_FFI_NATIVE_ERRORS_H_

#include <sstream>
#include <string>

#include "xla/ffi/api/ffi.h"

namespace xlabind::native {

// Everything an std::ostream takes, concatenated.
template <typename... Parts>
std::string StrCat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

template <typename... Parts>
xla::ffi::Error InvalidArgument(const Parts&... parts) {
  return xla::ffi::Error::InvalidArgument(StrCat(parts...));
}

template <typename... Parts>
xla::ffi::Error Internal(const Parts&... parts) {
  return xla::ffi::Error::Internal(StrCat(parts...));
}

}  // namespace xlabind::native

// Returns the ffi::Error `expr` from the enclosing handler if it is a failure.
#define XLABIND_RETURN_IF_ERROR(expr)                   \
  do {                                                  \
    ::xla::ffi::Error xlabind_error_ = (expr);          \
    if (xlabind_error_.failure()) return xlabind_error_; \
  } while (false)

#endif  // XLABIND_FFI_NATIVE_ERRORS_H_
