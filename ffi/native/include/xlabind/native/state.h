// Per-executable state: what a handler's instantiate stage builds once (a
// table, a plan, a solver handle) and its execute stage reads on every call.
//
//   struct Table : xlabind::native::State<Table> { std::vector<double> values; };
//   XLABIND_DEFINE_STATE_TYPE(MyTableCpu, Table);      // once, in one .cc file
//
//   ffi::ErrorOr<std::unique_ptr<Table>> Build(int64_t size) { ... }   // instantiate
//   ffi::Error Run(Table* table, ffi::AnyBuffer x, ...) { ... }        // execute
//   XLA_FFI_DEFINE_HANDLER_SYMBOL(MyOpInstantiateCpu, Build,
//       ffi::Ffi::BindInstantiate().Attr<int64_t>("size"));
//   XLA_FFI_DEFINE_HANDLER_SYMBOL(MyOpCpu, Run,
//       ffi::Ffi::Bind().Ctx<ffi::State<Table>>().Arg<ffi::AnyBuffer>()...);
//
// and in BUILD, xlabind_extension(handlers = {"cpu": {"my_op": xlabind_handler(
// instantiate = "MyOpInstantiateCpu", execute = "MyOpCpu")}}, state_types =
// {"cpu": ["MyTableCpu"]}). xlabind.register_ffi_targets registers the type before
// the targets that use it (XLA reads a handler's state type when the handler
// is registered).
//
// Facts to design around:
// - XLA runs instantiate once per call site when it builds the executable
//   (attributes only, no buffers), and keeps the state as long as the
//   executable; the CPU runtime runs only instantiate and execute (prepare
//   and initialize are GPU-only stages).
// - One state serves every device and every concurrent run of the
//   executable: keep it immutable after instantiate, or lock what changes.
// - XLA gives each registered type an id of its own per platform registry
//   (the CUDA plugin keeps its own), so a type serves one platform: give the
//   CPU and the CUDA handler two types (e.g. Table<Cpu>, Table<Cuda>).
#ifndef XLABIND_FFI_NATIVE_STATE_H_
#define XLABIND_FFI_NATIVE_STATE_H_

#include "xla/ffi/api/ffi.h"

namespace xlabind::native {

// The base of a state type an instantiate stage builds: the id XLA assigns
// when the type is registered, and how XLA deletes a state it owns. Derive
// with the type itself as the argument, and export it with
// XLABIND_DEFINE_STATE_TYPE.
//
// Example:
//   struct Table : xlabind::native::State<Table> { std::vector<float> values; };
template <typename Self>
struct State {
  static inline xla::ffi::TypeId id = XLA_FFI_UNKNOWN_TYPE_ID;
  static constexpr XLA_FFI_TypeInfo kTypeInfo = {
      XLA_FFI_TypeInfo_STRUCT_SIZE, nullptr, [](void* state) { delete static_cast<Self*>(state); }};
};

}  // namespace xlabind::native

// Exports a state type for the module xlabind_extension generates: two C
// functions, the type's id and its type info (its `state_types` argument
// names SYMBOL).
//
// Args:
//   SYMBOL: the name `state_types` lists.
//   TYPE: the state type (derived from State<TYPE>).
// Example:
//   XLABIND_DEFINE_STATE_TYPE(ExampleTableState, Table)
#define XLABIND_DEFINE_STATE_TYPE(SYMBOL, TYPE)                       \
  extern "C" XLA_FFI_TypeId* SYMBOL##_type_id() { return &TYPE::id; } \
  extern "C" const XLA_FFI_TypeInfo* SYMBOL##_type_info() { return &TYPE::kTypeInfo; }

#endif  // XLABIND_FFI_NATIVE_STATE_H_
