// example_square: y = x * x, and its derivative example_square_jvp:
// dy = 2 * x * t, linear in t and its own transpose, so it is the VJP too
// (2 * x * ct). CPU handlers.
//
// Bound with vmap_method="expand_dims", the derivative is also called with x
// not batched beside a batched t (jax.jacrev batches the cotangents only):
// then x has size 1 on the batch axis, and the handler broadcasts it.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "xlabind/native/broadcast.h"
#include "xlabind/native/dtype_dispatch.h"
#include "xlabind/native/errors.h"
#include "xlabind/native/shapes.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
namespace native = xlabind::native;

namespace {

// [square]
ffi::Error SquareCpu(ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y) {
  XLABIND_RETURN_IF_ERROR(
      native::CheckShape("example_square", "y", *y, native::ShapeOf(x)));
  return native::DispatchFloating("example_square", x.element_type(), [&](auto zero) {
    using T = decltype(zero);
    const T* in = x.typed_data<T>();
    T* out = y->typed_data<T>();
    for (size_t i = 0; i < x.element_count(); ++i) out[i] = in[i] * in[i];
    return ffi::Error::Success();
  });
}
// [square]

// [square_jvp]
// dy = 2 x t, where x and t each broadcast to dy's shape.
ffi::Error SquareJvpCpu(ffi::AnyBuffer x, ffi::AnyBuffer t,
                        ffi::Result<ffi::AnyBuffer> dy) {
  constexpr char kOp[] = "example_square_jvp";
  const std::vector<int64_t> shape = native::ShapeOf(*dy);
  XLABIND_RETURN_IF_ERROR(native::CheckSameType(kOp, "x", x, "t", t));
  XLABIND_RETURN_IF_ERROR(native::CheckSameType(kOp, "x", x, "dy", *dy));
  XLABIND_RETURN_IF_ERROR(native::CheckBroadcastsTo(kOp, "x", x, shape));
  XLABIND_RETURN_IF_ERROR(native::CheckBroadcastsTo(kOp, "t", t, shape));
  return native::DispatchFloating(kOp, x.element_type(), [&](auto zero) {
    using T = decltype(zero);
    const native::BroadcastIndex x_at(native::ShapeOf(x), shape);
    const native::BroadcastIndex t_at(native::ShapeOf(t), shape);
    // Runs of this many elements are contiguous in x, t and dy alike.
    const int64_t run = std::min(x_at.contiguous(), t_at.contiguous());
    const int64_t n = static_cast<int64_t>(dy->element_count());
    T* out = dy->typed_data<T>();
    for (int64_t begin = 0; begin < n; begin += run) {
      const T* xs = x.typed_data<T>() + x_at(begin);
      const T* ts = t.typed_data<T>() + t_at(begin);
      for (int64_t j = 0; j < run; ++j) out[begin + j] = T(2) * xs[j] * ts[j];
    }
    return ffi::Error::Success();
  });
}
// [square_jvp]

}  // namespace

// [bind]
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    ExampleSquareCpu, SquareCpu,
    ffi::Ffi::Bind().Arg<ffi::AnyBuffer>().Ret<ffi::AnyBuffer>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    ExampleSquareJvpCpu, SquareJvpCpu,
    ffi::Ffi::Bind().Arg<ffi::AnyBuffer>().Arg<ffi::AnyBuffer>().Ret<ffi::AnyBuffer>());
// [bind]
