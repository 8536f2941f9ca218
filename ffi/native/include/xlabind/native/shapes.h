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

// A buffer's dimensions.
//
// Args:
//   buffer: the buffer (an ffi::Buffer or ffi::AnyBuffer).
// Returns:
//   The dimensions, as a vector.
// Example:
//   const std::vector<int64_t> shape = ShapeOf(x);
template <typename Buffer>
std::vector<int64_t> ShapeOf(const Buffer& buffer) {
  auto dims = buffer.dimensions();
  return std::vector<int64_t>(dims.begin(), dims.end());
}

// A shape as Python prints a tuple: "(2, 3)", "(4,)", "()".
//
// Args:
//   shape: the dimensions.
// Returns:
//   The text.
// Example:
//   return InvalidArgument("my_op: x has shape ", ShapeString(ShapeOf(x)));
inline std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

// An error unless `buffer` has exactly `rank` dimensions.
//
// Args:
//   op: the operation's name, which the message starts with.
//   what: the buffer's name in the message ("x").
//   buffer: the buffer (an ffi::Buffer or ffi::AnyBuffer).
//   rank: the number of dimensions it must have.
// Returns:
//   Success, or an InvalidArgument error naming the buffer's shape.
// Example:
//   XLABIND_RETURN_IF_ERROR(CheckRank("my_op", "x", x, 2));
template <typename Buffer>
xla::ffi::Error CheckRank(const char* op, const char* what, const Buffer& buffer, size_t rank) {
  if (buffer.dimensions().size() == rank) return xla::ffi::Error::Success();
  return InvalidArgument(op, ": ", what, " must have ", rank, " dimensions, got shape ",
                         ShapeString(ShapeOf(buffer)));
}

// An error unless `buffer` has at least `min_rank` dimensions.
//
// Args:
//   op: the operation's name, which the message starts with.
//   what: the buffer's name in the message ("x").
//   buffer: the buffer (an ffi::Buffer or ffi::AnyBuffer).
//   min_rank: the fewest dimensions it may have.
// Returns:
//   Success, or an InvalidArgument error naming the buffer's shape.
// Example:
//   XLABIND_RETURN_IF_ERROR(CheckMinRank("my_op", "x", x, 1));
template <typename Buffer>
xla::ffi::Error CheckMinRank(const char* op, const char* what, const Buffer& buffer,
                             size_t min_rank) {
  if (buffer.dimensions().size() >= min_rank) return xla::ffi::Error::Success();
  return InvalidArgument(op, ": ", what, " must have at least ", min_rank,
                         " dimensions, got shape ", ShapeString(ShapeOf(buffer)));
}

// An error unless `buffer` has exactly `shape`.
//
// Args:
//   op: the operation's name, which the message starts with.
//   what: the buffer's name in the message ("x").
//   buffer: the buffer (an ffi::Buffer or ffi::AnyBuffer).
//   shape: the shape it must have.
// Returns:
//   Success, or an InvalidArgument error naming both shapes.
// Example:
//   XLABIND_RETURN_IF_ERROR(CheckShape("my_op", "out", *out, ShapeOf(x)));
template <typename Buffer>
xla::ffi::Error CheckShape(const char* op, const char* what, const Buffer& buffer,
                           const std::vector<int64_t>& shape) {
  if (ShapeOf(buffer) == shape) return xla::ffi::Error::Success();
  return InvalidArgument(op, ": ", what, " has shape ", ShapeString(ShapeOf(buffer)), ", expected ",
                         ShapeString(shape));
}

// An error unless `buffer` has the element type `dtype`.
//
// Args:
//   op: the operation's name, which the message starts with.
//   what: the buffer's name in the message ("x").
//   buffer: the buffer (an ffi::AnyBuffer).
//   dtype: the element type it must have.
// Returns:
//   Success, or an InvalidArgument error naming both dtypes.
// Example:
//   XLABIND_RETURN_IF_ERROR(CheckDtype("my_op", "x", x, xla::ffi::DataType::F32));
template <typename Buffer>
xla::ffi::Error CheckDtype(const char* op, const char* what, const Buffer& buffer,
                           xla::ffi::DataType dtype) {
  if (buffer.element_type() == dtype) return xla::ffi::Error::Success();
  return InvalidArgument(op, ": ", what, " has dtype ", DtypeDescription(buffer.element_type()),
                         ", expected ", DtypeDescription(dtype));
}

// An error unless two buffers have the same element type.
//
// Args:
//   op: the operation's name, which the message starts with.
//   what_a: the first buffer's name in the message.
//   a: the first buffer.
//   what_b: the second buffer's name in the message.
//   b: the second buffer.
// Returns:
//   Success, or an InvalidArgument error naming both dtypes.
// Example:
//   XLABIND_RETURN_IF_ERROR(CheckSameType("my_op", "x", x, "out", *out));
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
