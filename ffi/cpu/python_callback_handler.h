// The CPU XLA FFI handler (typed API, api_version=1) that runs a registered
// Python callable on XLA's buffers without copying them.
//
// Operands arrive as read-only NumPy views, results as writable ones; the
// callable is called in its entry's style (callback_registry.h). Attribute:
// `callback_key` (u64), the key of a CallbackEntry.
//
// Link `//ffi:cpu_python_callback_handler` into your own extension to reuse
// it; xlabind registers it for platform "cpu" as target
// "xlabind_python_callback".
#ifndef XLABIND_FFI_CPU_PYTHON_CALLBACK_HANDLER_H_
#define XLABIND_FFI_CPU_PYTHON_CALLBACK_HANDLER_H_

#include "xla/ffi/api/api.h"

extern "C" __attribute__((visibility("default")))
XLA_FFI_Error* XlabindCpuPythonCallback(XLA_FFI_CallFrame* call_frame);

#endif  // XLABIND_FFI_CPU_PYTHON_CALLBACK_HANDLER_H_
