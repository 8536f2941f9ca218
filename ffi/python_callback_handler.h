// The XLA FFI handler (typed API, api_version=1) that runs a registered Python
// callable on XLA's CPU buffers without copying them.
//
// Operands arrive as read-only NumPy views, results as writable ones; the
// callable is called as `callable(operands: tuple, results: tuple)` and must
// fill the results in place. Attribute: `callback_key` (u64), the key of a
// CallbackEntry (callback_registry.h).
//
// Link `//ffi:python_callback_handler` into your own extension to reuse it;
// the Python side of xlabind registers it as target "xlabind_python_callback".
#ifndef XLABIND_FFI_PYTHON_CALLBACK_HANDLER_H_
#define XLABIND_FFI_PYTHON_CALLBACK_HANDLER_H_

#include "xla/ffi/api/api.h"

extern "C" __attribute__((visibility("default")))
XLA_FFI_Error* XlabindPythonCallback(XLA_FFI_CallFrame* call_frame);

#endif  // XLABIND_FFI_PYTHON_CALLBACK_HANDLER_H_
