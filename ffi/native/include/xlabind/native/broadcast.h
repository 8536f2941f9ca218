// Operands that broadcast to the results' shape, for handlers bound with
// vmap_method="expand_dims". There, an operand that a vmap batches has the
// batch axis in front; one it does not batch has size 1 there. jax.jacfwd,
// jax.hessian and vmap over tangents batch the tangents only, so a JVP
// handler sees x of shape (1, n) beside t of shape (k, n), and writes (k, n).
//
//   XLABIND_RETURN_IF_ERROR(CheckBroadcastsTo("my_jvp", "x", x, ShapeOf(*out)));
//   const BroadcastIndex x_at(ShapeOf(x), ShapeOf(*out));
//   // element i of the result reads x[x_at(i)]; runs of x_at.contiguous()
//   // elements (from a multiple of it) are contiguous in x too.
#ifndef XLABIND_FFI_NATIVE_BROADCAST_H_
#define XLABIND_FFI_NATIVE_BROADCAST_H_

#include <cstdint>
#include <vector>

#include "xlabind/native/errors.h"
#include "xlabind/native/shapes.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind::native {

// An error unless `buffer` broadcasts to `shape`: the same rank, and each
// dimension that of `shape` or 1.
//
// Args:
//   op: the operation's name, which the message starts with.
//   what: the buffer's name in the message ("x").
//   buffer: the buffer (an ffi::Buffer or ffi::AnyBuffer).
//   shape: the shape it must broadcast to.
// Returns:
//   Success, or an InvalidArgument error naming both shapes.
// Example:
//   XLABIND_RETURN_IF_ERROR(CheckBroadcastsTo("my_jvp", "x", x, ShapeOf(*out)));
template <typename Buffer>
xla::ffi::Error CheckBroadcastsTo(const char* op, const char* what, const Buffer& buffer,
                                  const std::vector<int64_t>& shape) {
  const std::vector<int64_t> from = ShapeOf(buffer);
  bool fits = from.size() == shape.size();
  for (size_t k = 0; fits && k < from.size(); ++k) fits = from[k] == shape[k] || from[k] == 1;
  if (fits) return xla::ffi::Error::Success();
  return InvalidArgument(op, ": ", what, " has shape ", ShapeString(from),
                         ", which does not broadcast to ", ShapeString(shape),
                         " (each dimension equal or 1)");
}

// Maps an element of a row-major array of shape `to` to the element of a
// row-major array of shape `from` (which broadcasts to `to`) that it reads:
// construct it with (from, to); `index(i)` is the element of `from` that
// element `i` of `to` reads, and runs of `index.contiguous()` elements (from a
// multiple of it) are contiguous in `from` too.
//
// Example:
//   const BroadcastIndex x_at(ShapeOf(x), ShapeOf(*out));
//   for (int64_t i = 0; i < out->element_count(); ++i) y[i] = 2 * xs[x_at(i)];
class BroadcastIndex {
 public:
  BroadcastIndex(const std::vector<int64_t>& from, const std::vector<int64_t>& to)
      : to_(to), strides_(to.size(), 0) {
    int64_t stride = 1;
    for (size_t k = to.size(); k-- > 0;) {
      strides_[k] = from[k] == 1 && to[k] != 1 ? 0 : stride;
      stride *= from[k];
    }
    contiguous_ = 1;
    for (size_t k = to.size(); k-- > 0 && from[k] == to[k];) contiguous_ *= to[k];
  }

  // The element of `from` that element `i` of `to` reads.
  int64_t operator()(int64_t i) const {
    int64_t offset = 0;
    for (size_t k = to_.size(); k-- > 0;) {
      offset += (i % to_[k]) * strides_[k];
      i /= to_[k];
    }
    return offset;
  }

  // How many elements of `to`, from any multiple of this count, read
  // consecutive elements of `from` (at least 1).
  int64_t contiguous() const { return contiguous_ > 0 ? contiguous_ : 1; }

 private:
  std::vector<int64_t> to_;
  std::vector<int64_t> strides_;
  int64_t contiguous_;
};

}  // namespace xlabind::native

#endif  // XLABIND_FFI_NATIVE_BROADCAST_H_
