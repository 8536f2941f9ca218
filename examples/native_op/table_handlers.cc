// example_table: y = f(x) for f tabulated once per executable, and its
// derivative example_table_jvp: dy = f'(x) t. The table is described by a
// nested attribute,
//
//   table = {"function": "sin", "size": 1024, "range": {"lo": -4.0, "hi": 4.0}}
//
// and built by each target's instantiate stage, which XLA runs once per call
// site when it builds the executable, not on every call; the execute stage
// only reads it (one state serves every device and concurrent run: it never
// changes after instantiate). Between the nodes f is linear; outside the
// range it is the end value.
//
// CPU: the loop runs on XLA's intra-op thread pool; CUDA: the table is copied
// to device memory the state owns. Both keep each x's position in the table
// in scratch memory between two passes. The CUDA JVP, one kernel with no
// scratch, is marked command-buffer compatible in BUILD.bazel; the value
// kernel is not: scratch memory is allocated per call, which a CUDA graph
// replay would skip.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "xlabind/native/attributes.h"
#include "xlabind/native/dtype_dispatch.h"
#include "xlabind/native/errors.h"
#include "xlabind/native/parallel_for.h"
#include "xlabind/native/scratch.h"
#include "xlabind/native/shapes.h"
#include "xlabind/native/state.h"
#include "table_kernels.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
namespace native = xlabind::native;

namespace {

constexpr char kOp[] = "example_table";

// How many tables this process has built: example_tables_built reports it,
// so a test can see that instantiate runs once per executable.
std::atomic<int64_t> tables_built{0};

// [describe]
// The table's description, read from the `table` attribute.
struct Description {
  std::string function;
  int64_t size = 0;
  double lo = 0.0, hi = 0.0;
};

ffi::ErrorOr<Description> Describe(const ffi::Dictionary& table) {
  Description d;
  XLABIND_ASSIGN_OR_RETURN(std::string_view function,
                           native::Field<std::string_view>(kOp, table, "function"));
  d.function = std::string(function);
  XLABIND_ASSIGN_OR_RETURN(d.size, native::Field<int64_t>(kOp, table, "size"));
  XLABIND_ASSIGN_OR_RETURN(d.lo, native::Field<double>(kOp, table, "range.lo"));
  XLABIND_ASSIGN_OR_RETURN(d.hi, native::Field<double>(kOp, table, "range.hi"));
  if (d.size < 2) {
    return native::Failure(
        native::InvalidArgument(kOp, ": table size must be at least 2, got ", d.size));
  }
  if (!(d.hi > d.lo)) {
    return native::Failure(native::InvalidArgument(
        kOp, ": table range must have lo < hi, got lo = ", d.lo, ", hi = ", d.hi));
  }
  return d;
}
// [describe]

ffi::ErrorOr<std::vector<double>> Nodes(const Description& d) {
  double (*f)(double) = nullptr;
  if (d.function == "sin") f = [](double x) { return std::sin(x); };
  if (d.function == "tanh") f = [](double x) { return std::tanh(x); };
  if (d.function == "exp") f = [](double x) { return std::exp(x); };
  if (f == nullptr) {
    return native::Failure(native::InvalidArgument(
        kOp, ": unknown table function '", d.function, "'; use sin, tanh or exp"));
  }
  std::vector<double> values(d.size);
  for (int64_t k = 0; k < d.size; ++k) {
    values[k] = f(d.lo + (d.hi - d.lo) * static_cast<double>(k) /
                             static_cast<double>(d.size - 1));
  }
  ++tables_built;
  return values;
}

// -- CPU ---------------------------------------------------------------------

// [state]
struct TableCpu : native::State<TableCpu> {
  Description description;
  std::vector<double> values;

  // Where x falls among the nodes, clamped to them; NaN stays NaN.
  double Position(double x) const {
    const double t = (x - description.lo) / (description.hi - description.lo) *
                     static_cast<double>(description.size - 1);
    return t != t ? t : std::clamp(t, 0.0, static_cast<double>(description.size - 1));
  }
  int64_t Cell(double position) const {
    return std::min(static_cast<int64_t>(position), description.size - 2);
  }
};

ffi::ErrorOr<std::unique_ptr<TableCpu>> BuildCpu(ffi::Dictionary table) {
  auto state = std::make_unique<TableCpu>();
  XLABIND_ASSIGN_OR_RETURN(state->description, Describe(table));
  XLABIND_ASSIGN_OR_RETURN(state->values, Nodes(state->description));
  return state;
}
// [state]

// [execute]
// Elements per chunk a pool thread takes; below two chunks, one thread.
constexpr int64_t kChunk = 1 << 14;

ffi::Error TableCpuExecute(ffi::ThreadPool pool, TableCpu* table, ffi::AnyBuffer x,
                           ffi::Result<ffi::AnyBuffer> y, ffi::Dictionary) {
  XLABIND_RETURN_IF_ERROR(native::CheckShape(kOp, "y", *y, native::ShapeOf(x)));
  const int64_t n = static_cast<int64_t>(x.element_count());
  native::Scratch scratch;
  XLABIND_ASSIGN_OR_RETURN(double* position, scratch.Allocate<double>(kOp, n));
  return native::DispatchFloating(kOp, x.element_type(), [&](auto zero) {
    using T = decltype(zero);
    const T* in = x.typed_data<T>();
    T* out = y->typed_data<T>();
    native::ParallelChunks(&pool, n, kChunk, kChunk,
                           [&](int, int64_t begin, int64_t end) {
                             for (int64_t i = begin; i < end; ++i)
                               position[i] = table->Position(in[i]);
                             for (int64_t i = begin; i < end; ++i) {
                               if (position[i] != position[i]) {  // x is NaN
                                 out[i] = static_cast<T>(position[i]);
                                 continue;
                               }
                               const int64_t cell = table->Cell(position[i]);
                               const double w = position[i] - static_cast<double>(cell);
                               out[i] = static_cast<T>(table->values[cell] * (1.0 - w) +
                                                       table->values[cell + 1] * w);
                             }
                           });
    return ffi::Error::Success();
  });
}
// [execute]

ffi::Error TableJvpCpuExecute(ffi::ThreadPool pool, TableCpu* table, ffi::AnyBuffer x,
                              ffi::AnyBuffer t, ffi::Result<ffi::AnyBuffer> dy,
                              ffi::Dictionary) {
  constexpr char kJvp[] = "example_table_jvp";
  XLABIND_RETURN_IF_ERROR(native::CheckSameType(kJvp, "x", x, "t", t));
  XLABIND_RETURN_IF_ERROR(native::CheckShape(kJvp, "t", t, native::ShapeOf(x)));
  XLABIND_RETURN_IF_ERROR(native::CheckShape(kJvp, "dy", *dy, native::ShapeOf(x)));
  const Description& d = table->description;
  const double per_unit = static_cast<double>(d.size - 1) / (d.hi - d.lo);
  return native::DispatchFloating(kJvp, x.element_type(), [&](auto zero) {
    using T = decltype(zero);
    const T* xs = x.typed_data<T>();
    const T* ts = t.typed_data<T>();
    T* out = dy->typed_data<T>();
    native::ParallelChunks(&pool, static_cast<int64_t>(x.element_count()), kChunk,
                           kChunk, [&](int, int64_t begin, int64_t end) {
                             for (int64_t i = begin; i < end; ++i) {
                               // Flat outside the range; NaN stays NaN.
                               if (!(xs[i] >= d.lo && xs[i] <= d.hi)) {
                                 out[i] = xs[i] != xs[i] ? xs[i] : T(0);
                                 continue;
                               }
                               const int64_t cell = table->Cell(table->Position(xs[i]));
                               const double slope =
                                   (table->values[cell + 1] - table->values[cell]) *
                                   per_unit;
                               out[i] = static_cast<T>(slope * ts[i]);
                             }
                           });
    return ffi::Error::Success();
  });
}

ffi::Error TablesBuilt(ffi::AnyBuffer, ffi::Result<ffi::BufferR0<ffi::S32>> count) {
  *count->typed_data() = static_cast<int32_t>(tables_built.load());
  return ffi::Error::Success();
}

// -- CUDA --------------------------------------------------------------------

// XLA's CUDA plugin keeps a type registry of its own: a type per platform.
struct TableCuda : native::State<TableCuda> {
  Description description;
  double* device = nullptr;
  ~TableCuda() {
    if (device != nullptr) ExampleTableFree(device);
  }
};

ffi::ErrorOr<std::unique_ptr<TableCuda>> BuildCuda(ffi::Dictionary table) {
  auto state = std::make_unique<TableCuda>();
  XLABIND_ASSIGN_OR_RETURN(state->description, Describe(table));
  XLABIND_ASSIGN_OR_RETURN(std::vector<double> values, Nodes(state->description));
  const char* error =
      ExampleTableUpload(values.data(), state->description.size, &state->device);
  if (error[0] != '\0') {
    return native::Failure(
        native::Internal(kOp, " (CUDA): could not upload the table: ", error));
  }
  return state;
}

ffi::Error CheckFloat32(const char* op, ffi::AnyBuffer x) {
  if (x.element_type() == ffi::DataType::F32) return ffi::Error::Success();
  return native::InvalidArgument(op, " (CUDA): float32 only");
}

// [cuda_execute]
ffi::Error TableCudaExecute(void* stream, ffi::ScratchAllocator allocator,
                            TableCuda* table, ffi::AnyBuffer x,
                            ffi::Result<ffi::AnyBuffer> y, ffi::Dictionary) {
  XLABIND_RETURN_IF_ERROR(CheckFloat32(kOp, x));
  XLABIND_RETURN_IF_ERROR(native::CheckShape(kOp, "y", *y, native::ShapeOf(x)));
  const int64_t n = static_cast<int64_t>(x.element_count());
  native::Scratch scratch(&allocator);
  XLABIND_ASSIGN_OR_RETURN(double* position, scratch.Allocate<double>(kOp, n));
  const Description& d = table->description;
  const char* error =
      ExampleTableLaunchF32(table->device, d.size, d.lo, d.hi, x.typed_data<float>(),
                            y->typed_data<float>(), position, n, stream);
  if (error[0] != '\0') return native::Internal(kOp, " (CUDA): ", error);
  return ffi::Error::Success();
}
// [cuda_execute]

ffi::Error TableJvpCudaExecute(void* stream, TableCuda* table, ffi::AnyBuffer x,
                               ffi::AnyBuffer t, ffi::Result<ffi::AnyBuffer> dy,
                               ffi::Dictionary) {
  constexpr char kJvp[] = "example_table_jvp";
  XLABIND_RETURN_IF_ERROR(CheckFloat32(kJvp, x));
  XLABIND_RETURN_IF_ERROR(native::CheckSameType(kJvp, "x", x, "t", t));
  XLABIND_RETURN_IF_ERROR(native::CheckShape(kJvp, "t", t, native::ShapeOf(x)));
  const Description& d = table->description;
  const char* error = ExampleTableJvpLaunchF32(
      table->device, d.size, d.lo, d.hi, x.typed_data<float>(), t.typed_data<float>(),
      dy->typed_data<float>(), static_cast<int64_t>(x.element_count()), stream);
  if (error[0] != '\0') return native::Internal(kJvp, " (CUDA): ", error);
  return ffi::Error::Success();
}

}  // namespace

// [bind]
XLABIND_DEFINE_STATE_TYPE(ExampleTableCpu, TableCpu);
XLABIND_DEFINE_STATE_TYPE(ExampleTableCuda, TableCuda);

// Both targets of a platform build their table the same way.
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    ExampleTableBuildCpu, BuildCpu,
    ffi::Ffi::BindInstantiate().Attr<ffi::Dictionary>("table"));
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    ExampleTableBuildCuda, BuildCuda,
    ffi::Ffi::BindInstantiate().Attr<ffi::Dictionary>("table"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(ExampleTableCpu, TableCpuExecute,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Ctx<ffi::State<TableCpu>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<ffi::Dictionary>("table"));
// [bind]

XLA_FFI_DEFINE_HANDLER_SYMBOL(ExampleTableJvpCpu, TableJvpCpuExecute,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Ctx<ffi::State<TableCpu>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<ffi::Dictionary>("table"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    ExampleTablesBuilt, TablesBuilt,
    ffi::Ffi::Bind().Arg<ffi::AnyBuffer>().Ret<ffi::BufferR0<ffi::S32>>());

// [cuda_bind]
XLA_FFI_DEFINE_HANDLER_SYMBOL(ExampleTableCuda, TableCudaExecute,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<void*>>()
                                  .Ctx<ffi::ScratchAllocator>()
                                  .Ctx<ffi::State<TableCuda>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<ffi::Dictionary>("table"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(ExampleTableJvpCuda, TableJvpCudaExecute,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<void*>>()
                                  .Ctx<ffi::State<TableCuda>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Attr<ffi::Dictionary>("table"));
// [cuda_bind]
