// Structured attributes: a dict passed from Python (a keyword argument or an
// ffi_target attribute, nested dicts too) reaches the handler as an
// xla::ffi::Dictionary. Bind it with `.Attr<xla::ffi::Dictionary>("table")`
// and read a field by its dotted path:
//
//   XLABIND_ASSIGN_OR_RETURN(int64_t size, native::Field<int64_t>("my_op", table, "size"));
//   XLABIND_ASSIGN_OR_RETURN(double lo, native::Field<double>("my_op", table, "range.lo"));
//
// Python ints arrive as int64_t, floats as double, strings as
// std::string_view, tuples of numbers as xla::ffi::Span<const int64_t/double>.
#ifndef XLABIND_FFI_NATIVE_ATTRIBUTES_H_
#define XLABIND_FFI_NATIVE_ATTRIBUTES_H_

#include <string>
#include <string_view>

#include "xlabind/native/errors.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind::native {

// The field at `path` of an attribute dictionary, as T.
//
// Args:
//   op: the operation's name, which an error message starts with.
//   dict: the dictionary attribute (bind `.Attr<xla::ffi::Dictionary>("name")`).
//   path: the field's name; "a.b.c" reads nested dictionaries.
// Returns:
//   The value, or an error naming `op`, the path and what is missing or of
//   another type.
// Example:
//   XLABIND_ASSIGN_OR_RETURN(float scale, Field<float>("my_op", options, "scale"));
template <typename T>
xla::ffi::ErrorOr<T> Field(const char* op, const xla::ffi::Dictionary& dict,
                           std::string_view path) {
  const size_t dot = path.find('.');
  const std::string_view head = path.substr(0, dot);
  if (!dict.contains(head)) {
    return xla::ffi::Unexpected<xla::ffi::Error>(
        InvalidArgument(op, ": the attribute has no field '", head, "' (reading '", path, "')"));
  }
  if (dot != std::string_view::npos) {
    xla::ffi::ErrorOr<xla::ffi::Dictionary> inner = dict.get<xla::ffi::Dictionary>(head);
    if (!inner.has_value()) {
      return xla::ffi::Unexpected<xla::ffi::Error>(
          InvalidArgument(op, ": field '", head, "' is not a dict (reading '", path, "')"));
    }
    return Field<T>(op, *inner, path.substr(dot + 1));
  }
  xla::ffi::ErrorOr<T> value = dict.get<T>(head);
  if (!value.has_value()) {
    return xla::ffi::Unexpected<xla::ffi::Error>(
        InvalidArgument(op, ": field '", head, "' has the wrong type: ", value.error().message()));
  }
  return value;
}

}  // namespace xlabind::native

#endif  // XLABIND_FFI_NATIVE_ATTRIBUTES_H_
