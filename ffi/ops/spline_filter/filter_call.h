// What a spline_filter call asks for, read and checked the same way by the
// CPU handlers and the CUDA ones: the degree, the boundary, and for each
// filtered axis (in order) the lines along it.
#ifndef XLABIND_FFI_OPS_SPLINE_FILTER_FILTER_CALL_H_
#define XLABIND_FFI_OPS_SPLINE_FILTER_FILTER_CALL_H_

#include <cstdint>
#include <vector>

#include "xlabind/native/errors.h"
#include "xlabind/native/shapes.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind::spline_filter {

// The lines along one axis of a row-major array: `count` lines of `length`
// values `stride` apart; line k starts at (k / stride) * length * stride +
// k % stride.
struct AxisLines {
  int64_t length;
  int64_t stride;
  int64_t count;
  int64_t Start(int64_t k) const { return (k / stride) * length * stride + k % stride; }
};

struct FilterCall {
  int order;
  int32_t boundary;
  std::vector<AxisLines> axes;  // in the order the filter runs them
  int64_t size;
};

// `axes` count from the end (-1 the last axis), so that the batch
// dimensions vmap puts in front are never filtered.
inline xla::ffi::Error ReadFilterCall(const char* op, const xla::ffi::AnyBuffer& x,
                                      const xla::ffi::AnyBuffer& y, int64_t order, int64_t boundary,
                                      xla::ffi::Span<const int64_t> axes, FilterCall* call) {
  XLABIND_RETURN_IF_ERROR(native::CheckShape(op, "the result", y, native::ShapeOf(x)));
  XLABIND_RETURN_IF_ERROR(native::CheckSameType(op, "the input", x, "the result", y));
  if (order < 2 || order > 5) {
    return native::InvalidArgument(op, ": order must be 2 to 5, got ", order);
  }
  if (boundary < 0 || boundary > 2) {
    return native::InvalidArgument(op, ": unknown boundary ", boundary);
  }
  const std::vector<int64_t> shape = native::ShapeOf(x);
  const int64_t rank = static_cast<int64_t>(shape.size());
  call->order = static_cast<int>(order);
  call->boundary = static_cast<int32_t>(boundary);
  call->size = static_cast<int64_t>(x.element_count());
  call->axes.clear();
  std::vector<bool> seen(rank, false);
  for (int64_t axis : axes) {
    if (axis < -rank || axis >= 0) {
      return native::InvalidArgument(op, ": axis ", axis,
                                     " (counted from the end) is not one of "
                                     "the input's ",
                                     rank, " dimensions");
    }
    const int64_t a = rank + axis;
    if (seen[a]) return native::InvalidArgument(op, ": axis ", axis, " appears twice");
    seen[a] = true;
    int64_t stride = 1;
    for (int64_t b = a + 1; b < rank; ++b) stride *= shape[b];
    const int64_t length = shape[a];
    call->axes.push_back({length, stride, length == 0 ? 0 : call->size / length});
  }
  return xla::ffi::Error::Success();
}

template <typename Binding>
auto BindFilter(Binding binding) {
  return std::move(binding)
      .template Arg<xla::ffi::AnyBuffer>()
      .template Ret<xla::ffi::AnyBuffer>()
      .template Attr<int64_t>("order")
      .template Attr<int64_t>("boundary")
      .template Attr<xla::ffi::Span<const int64_t>>("axes");
}

}  // namespace xlabind::spline_filter

#endif  // XLABIND_FFI_OPS_SPLINE_FILTER_FILTER_CALL_H_
