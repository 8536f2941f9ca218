// Errors for XLA FFI handlers: messages built from parts, and early returns.
//
//   if (rank != 2) return InvalidArgument("my_op: x must have rank 2, got ", rank);
//   XLABIND_RETURN_IF_ERROR(CheckRank("my_op", "x", x, 2));
//   XLABIND_ASSIGN_OR_RETURN(float* tmp, scratch.Allocate<float>("my_op", n));
#ifndef XLABIND_FFI_NATIVE_ERRORS_H_
#define XLABIND_FFI_NATIVE_ERRORS_H_

#include <sstream>
#include <string>
#include <utility>

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

// An error on its way out of a function returning either ffi::Error or
// ffi::ErrorOr<T> (XLABIND_ASSIGN_OR_RETURN serves both).
struct PropagatedError {
  xla::ffi::Error error;
  operator xla::ffi::Error() const { return error; }  // NOLINT: implicit by design
  template <typename T>
  operator xla::ffi::ErrorOr<T>() const {  // NOLINT
    return xla::ffi::Unexpected<xla::ffi::Error>(error);
  }
};

// `error` as a return value of a function returning ffi::Error or
// ffi::ErrorOr<T> (an instantiate stage, a helper that builds something):
//   if (size < 2) return Failure(InvalidArgument("my_op: size must be at least 2"));
inline PropagatedError Failure(xla::ffi::Error error) { return PropagatedError{std::move(error)}; }

}  // namespace xlabind::native

// Returns the ffi::Error `expr` from the enclosing handler if it is a failure.
#define XLABIND_RETURN_IF_ERROR(expr)                    \
  do {                                                   \
    ::xla::ffi::Error xlabind_error_ = (expr);           \
    if (xlabind_error_.failure()) return xlabind_error_; \
  } while (false)

// Assigns the value of the ffi::ErrorOr `expr` to `lhs` (a declaration or an
// lvalue), or returns its error from the enclosing function (one returning
// ffi::Error or ffi::ErrorOr).
#define XLABIND_ASSIGN_OR_RETURN(lhs, expr) \
  XLABIND_ASSIGN_OR_RETURN_(lhs, expr, XLABIND_CONCAT_(xlabind_or_, __LINE__))
#define XLABIND_CONCAT_(a, b) XLABIND_CONCAT_IMPL_(a, b)
#define XLABIND_CONCAT_IMPL_(a, b) a##b
#define XLABIND_ASSIGN_OR_RETURN_(lhs, expr, name)           \
  auto name = (expr);                                        \
  if (!name.has_value()) {                                   \
    return ::xlabind::native::PropagatedError{name.error()}; \
  }                                                          \
  lhs = std::move(name.value())

#endif  // XLABIND_FFI_NATIVE_ERRORS_H_
