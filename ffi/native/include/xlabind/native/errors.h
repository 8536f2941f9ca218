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

// Everything an std::ostream takes, concatenated into a string.
//
// Args:
//   parts: the values, in order.
// Returns:
//   The text.
// Example:
//   std::string text = StrCat("shape ", rows, "x", columns);
template <typename... Parts>
std::string StrCat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

// An InvalidArgument error whose message is `parts` concatenated (StrCat):
// the error for bad input.
//
// Args:
//   parts: the message's pieces, in order.
// Returns:
//   The error.
// Example:
//   if (rank != 2) return InvalidArgument("my_op: x must have rank 2, got ", rank);
template <typename... Parts>
xla::ffi::Error InvalidArgument(const Parts&... parts) {
  return xla::ffi::Error::InvalidArgument(StrCat(parts...));
}

// An Internal error whose message is `parts` concatenated (StrCat): the
// error for a failure that is not the caller's.
//
// Args:
//   parts: the message's pieces, in order.
// Returns:
//   The error.
// Example:
//   if (status != 0) return Internal("my_op: the library failed with ", status);
template <typename... Parts>
xla::ffi::Error Internal(const Parts&... parts) {
  return xla::ffi::Error::Internal(StrCat(parts...));
}

// An error on its way out of a function returning either ffi::Error or
// ffi::ErrorOr<T>: Failure makes one, XLABIND_ASSIGN_OR_RETURN returns one,
// and it converts to either return type.
//
// Example:
//   xla::ffi::ErrorOr<Table> Build(int64_t n) {
//     if (n < 2) return Failure(InvalidArgument("my_op: n must be at least 2"));
//     return Table(n);
//   }
struct PropagatedError {
  xla::ffi::Error error;
  operator xla::ffi::Error() const { return error; }  // NOLINT: implicit by design
  template <typename T>
  operator xla::ffi::ErrorOr<T>() const {  // NOLINT
    return xla::ffi::Unexpected<xla::ffi::Error>(error);
  }
};

// An error as the return value of a function returning ffi::Error or
// ffi::ErrorOr<T> (an instantiate stage, a helper that builds something).
//
// Args:
//   error: the error.
// Returns:
//   It, as a PropagatedError.
// Example:
//   if (size < 2) return Failure(InvalidArgument("my_op: size must be at least 2"));
inline PropagatedError Failure(xla::ffi::Error error) { return PropagatedError{std::move(error)}; }

}  // namespace xlabind::native

// Returns the ffi::Error `expr` from the enclosing handler if it is a
// failure.
//
// Args:
//   expr: an expression of type ffi::Error.
// Example:
//   XLABIND_RETURN_IF_ERROR(CheckRank("my_op", "x", x, 2));
#define XLABIND_RETURN_IF_ERROR(expr)                    \
  do {                                                   \
    ::xla::ffi::Error xlabind_error_ = (expr);           \
    if (xlabind_error_.failure()) return xlabind_error_; \
  } while (false)

// Assigns the value of an ffi::ErrorOr to `lhs`, or returns its error from
// the enclosing function (one returning ffi::Error or ffi::ErrorOr).
//
// Args:
//   lhs: a declaration or an lvalue.
//   expr: an expression of type ffi::ErrorOr<T>.
// Example:
//   XLABIND_ASSIGN_OR_RETURN(float* tmp, scratch.Allocate<float>("my_op", n));
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
