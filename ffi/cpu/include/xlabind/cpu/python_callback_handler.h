// The CPU XLA FFI handlers (typed API, api_version=1) that run a registered
// Python callable on XLA's buffers without copying them.
//
// Operands arrive as read-only NumPy views, results as writable ones; the
// callable is called in its entry's style (callback_registry.h). Attribute:
// `callback_key` (u64), the key of a CallbackEntry, resolved once by the
// instantiate stage (callback_state.h), whose state type must be registered
// first (jax.ffi.register_ffi_type with the type id and info below).
//
// Register as a stage bundle for platform "cpu":
//   {"instantiate": XlabindCpuPythonCallbackInstantiate,
//    "execute": XlabindCpuPythonCallback}                 -> "xlabind_python_callback"
//   {"instantiate": ..., "execute": XlabindCpuPythonCallbackReportingStatus}
//                                       -> "xlabind_python_callback_status"
// The second has one more result, the call's status (native/call_status.h).
// Link `//ffi:cpu_python_callback_handler` into your own extension to reuse
// them.
#ifndef XLABIND_FFI_CPU_PYTHON_CALLBACK_HANDLER_H_
#define XLABIND_FFI_CPU_PYTHON_CALLBACK_HANDLER_H_

#include "xla/ffi/api/api.h"

extern "C" {
__attribute__((visibility("default"))) XLA_FFI_Error* XlabindCpuPythonCallbackInstantiate(
    XLA_FFI_CallFrame* call_frame);
__attribute__((visibility("default"))) XLA_FFI_Error* XlabindCpuPythonCallback(
    XLA_FFI_CallFrame* call_frame);
__attribute__((visibility("default"))) XLA_FFI_Error* XlabindCpuPythonCallbackReportingStatus(
    XLA_FFI_CallFrame* call_frame);
}

namespace xlabind {
const XLA_FFI_TypeId* CpuCallbackStateTypeId();
const XLA_FFI_TypeInfo* CpuCallbackStateTypeInfo();
}  // namespace xlabind

#endif  // XLABIND_FFI_CPU_PYTHON_CALLBACK_HANDLER_H_
