// FFI handlers that exercise each capability of xlabind's native API, one at a
// time, for tests/native/test_native_api.py (examples/native_op has them
// together, as a user would write an op):
//   native_api_counter        state built by an instantiate stage from a
//                             structured (nested dict) attribute;
//   native_api_pool           parallel loops on XLA's intra-op thread pool;
//   native_api_scratch        scratch memory;
//   native_api_scale          y = factor * x, for aliasing a result to x;
//   native_api_ticket         jax's ordering token in and out (effect="ordered"):
//                             y = x, and the call's place in the process's
//                             order of calls (1, 2, ...), so a test sees the
//                             order XLA ran them in;
//   native_api_nothing[_cb]   CUDA handlers without and with the
//                             command-buffer trait (xlabind_extension).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

#include "xlabind/native/attributes.h"
#include "xlabind/native/dtype_dispatch.h"
#include "xlabind/native/errors.h"
#include "xlabind/native/parallel_for.h"
#include "xlabind/native/scratch.h"
#include "xlabind/native/shapes.h"
#include "xlabind/native/state.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
namespace native = xlabind::native;

namespace {

// How many states instantiate stages have built in this process.
std::atomic<int64_t> instantiations{0};

// y = scale * x + offset, with scale and offset read once per executable.
struct Counter : native::State<Counter> {
  int64_t serial = 0;  // which instantiation built it (1, 2, ...)
  double scale = 1.0, offset = 0.0;
};

ffi::ErrorOr<std::unique_ptr<Counter>> CounterInstantiate(ffi::Dictionary config) {
  auto counter = std::make_unique<Counter>();
  XLABIND_ASSIGN_OR_RETURN(counter->offset,
                           native::Field<double>("native_api_counter", config, "offset"));
  XLABIND_ASSIGN_OR_RETURN(counter->scale,
                           native::Field<double>("native_api_counter", config, "nested.scale"));
  counter->serial = ++instantiations;
  return counter;
}

ffi::Error CounterExecute(Counter* counter, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y,
                          ffi::Result<ffi::BufferR0<ffi::S64>> serial, ffi::Dictionary) {
  *serial->typed_data() = counter->serial;
  return native::DispatchFloating("native_api_counter", x.element_type(), [&](auto zero) {
    using T = decltype(zero);
    const T* in = x.typed_data<T>();
    T* out = y->typed_data<T>();
    for (size_t i = 0; i < x.element_count(); ++i) {
      out[i] = static_cast<T>(counter->scale * in[i] + counter->offset);
    }
    return ffi::Error::Success();
  });
}

// y = 2 x, in chunks on XLA's pool; also reports the pool's size and how
// many shares ParallelFor used.
ffi::Error PoolExecute(ffi::ThreadPool pool, ffi::Buffer<ffi::F64> x,
                       ffi::Result<ffi::Buffer<ffi::F64>> y,
                       ffi::Result<ffi::BufferR1<ffi::S64>> counts, int64_t grain) {
  const int64_t n = static_cast<int64_t>(x.element_count());
  const double* in = x.typed_data();
  double* out = y->typed_data();
  std::atomic<int64_t> shares{0};
  native::ParallelFor(&pool, n, grain, [&](int, int64_t begin, int64_t end) {
    ++shares;
    for (int64_t i = begin; i < end; ++i) out[i] = in[i];
  });
  native::ParallelChunks(&pool, n, grain, grain, [&](int, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] *= 2.0;
  });
  counts->typed_data()[0] = pool.num_threads();
  counts->typed_data()[1] = shares.load();
  return ffi::Error::Success();
}

// y = x reversed, through a scratch copy of x; `extra` more values of
// scratch are asked for, to test a request that cannot be met.
ffi::Error ScratchExecute(ffi::Buffer<ffi::F64> x, ffi::Result<ffi::Buffer<ffi::F64>> y,
                          int64_t extra) {
  const size_t n = x.element_count();
  native::Scratch scratch;
  XLABIND_ASSIGN_OR_RETURN(double* copy, scratch.Allocate<double>("native_api_scratch", n));
  XLABIND_ASSIGN_OR_RETURN(
      double* unused, scratch.Allocate<double>("native_api_scratch", static_cast<size_t>(extra)));
  (void)unused;
  std::copy(x.typed_data(), x.typed_data() + n, copy);
  std::reverse_copy(copy, copy + n, y->typed_data());
  return ffi::Error::Success();
}

ffi::Error ScaleExecute(ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y, double factor) {
  XLABIND_RETURN_IF_ERROR(native::CheckShape("native_api_scale", "y", *y, native::ShapeOf(x)));
  return native::DispatchFloating("native_api_scale", x.element_type(), [&](auto zero) {
    using T = decltype(zero);
    const T* in = x.typed_data<T>();
    T* out = y->typed_data<T>();  // may be `in` itself (aliased)
    for (size_t i = 0; i < x.element_count(); ++i) out[i] = static_cast<T>(factor) * in[i];
    return ffi::Error::Success();
  });
}

// How many native_api_ticket calls have run in this process.
std::atomic<int32_t> tickets{0};

ffi::Error TicketExecute(ffi::Token, ffi::AnyBuffer x, ffi::Result<ffi::Token>,
                         ffi::Result<ffi::AnyBuffer> y,
                         ffi::Result<ffi::BufferR0<ffi::S32>> ticket) {
  XLABIND_RETURN_IF_ERROR(native::CheckShape("native_api_ticket", "y", *y, native::ShapeOf(x)));
  std::copy_n(static_cast<const char*>(x.untyped_data()), x.size_bytes(),
              static_cast<char*>(y->untyped_data()));
  *ticket->typed_data() = ++tickets;
  return ffi::Error::Success();
}

ffi::Error Nothing(void*) { return ffi::Error::Success(); }

}  // namespace

XLABIND_DEFINE_STATE_TYPE(NativeApiCounter, Counter);

XLA_FFI_DEFINE_HANDLER_SYMBOL(NativeApiCounterInstantiate, CounterInstantiate,
                              ffi::Ffi::BindInstantiate().Attr<ffi::Dictionary>("config"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(NativeApiCounterExecute, CounterExecute,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::State<Counter>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::BufferR0<ffi::S64>>()
                                  .Attr<ffi::Dictionary>("config"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(NativeApiPool, PoolExecute,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Ret<ffi::Buffer<ffi::F64>>()
                                  .Ret<ffi::BufferR1<ffi::S64>>()
                                  .Attr<int64_t>("grain"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    NativeApiScratch, ScratchExecute,
    ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F64>>().Ret<ffi::Buffer<ffi::F64>>().Attr<int64_t>(
        "extra"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    NativeApiScale, ScaleExecute,
    ffi::Ffi::Bind().Arg<ffi::AnyBuffer>().Ret<ffi::AnyBuffer>().Attr<double>("factor"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(NativeApiTicket, TicketExecute,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Token>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::Token>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::BufferR0<ffi::S32>>());

// Launches nothing: the same (empty) device work on every call, so a CUDA
// graph may capture it; registered with and without the trait.
XLA_FFI_DEFINE_HANDLER_SYMBOL(NativeApiNothingCuda, Nothing,
                              ffi::Ffi::Bind().Ctx<ffi::PlatformStream<void*>>());
