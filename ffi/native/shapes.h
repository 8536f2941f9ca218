// Shape checks for XLA FFI handlers, with errors that name the operation, the
// buffer and both shapes.
#ifndef XLABIND_FFI_NATIVE_SHAPES_H_
#define XLABIND_FFI_NATIVE_SHAPES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "xlabind/native/dtype_names.h"
#include "xlabind/native/errors.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind::native {

template <typename Buffer>
std::vector<int64_t> ShapeOf(const Buffer& buffer) {
  auto dims = buffer.dimensions();
  return std::vector<int64_t>(dims.begin(), dims.end());
}

inline std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

// An error unless `buffer` has exactly `rank` dimensions.
template <typename Buffer>
xla::ffi::Error CheckRank(const char* op, const char* what, const Buffer& buffer, size_t rank) {
  if (buffer.dimensions().size() == rank) return xla::ffi::Error::Success();
  return InvalidArgument(op, ": ", what, " must have ", rank, " dimensions, got shape ",
                         ShapeString(ShapeOf(buffer)));
}

// An error unless `buffer` has at least `min_rank` dimensions.
template <typename Buffer>
xla::ffi::Error CheckMinRank(const char* op, const char* what, const Buffer& buffer,
                             size_t min_rank) {
  if (buffer.dimensions().size() >= min_rank) return xla::ffi::Error::Success();
  return InvalidArgument(op, ": ", what, " must have at least ", min_rank,
                         " dimensions, got shape ", ShapeString(ShapeOf(buffer)));
}

// An error unless `buffer` has exactly `shape`.
template <typename Buffer>
xla::ffi::Error CheckShape(const char* op, const char* what, const Buffer& buffer,
                           const std::vector<int64_t>& shape) {
  if (ShapeOf(buffer) == shape) return xla::ffi::Error::Success();
  return InvalidArgument(op, ": ", what, " has shape ", ShapeString(ShapeOf(buffer)), ", expected ",
                         ShapeString(shape));
}

// An error unless `buffer` has the element type `dtype`.
template <typename Buffer>
xla::ffi::Error CheckDtype(const char* op, const char* what, const Buffer& buffer,
                           xla::ffi::DataType dtype) {
  if (buffer.element_type() == dtype) return xla::ffi::Error::Success();
  return InvalidArgument(op, ": ", what, " has dtype ", DtypeDescription(buffer.element_type()),
                         ", expected ", DtypeDescription(dtype));
}

// An error unless the two buffers have the same element type.
template <typename A, typename B>
xla::ffi::Error CheckSameType(const char* op, const char* what_a, const A& a, const char* what_b,
                              const B& b) {
  if (a.element_type() == b.element_type()) return xla::ffi::Error::Success();
  return InvalidArgument(op, ": ", what_a, " and ", what_b, " must have the same dtype, got ",
                         DtypeDescription(a.element_type()), " and ",
                         DtypeDescription(b.element_type()));
}

}  // namespace xlabind::native

#endif  // XLABIND_FFI_NATIVE_SHAPES_H_
