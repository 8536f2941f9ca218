// A native FFI handler that does nothing: the floor every callback path is
// measured against (tools/benchmark.py) and a target for primitive tests that
// need no Python in the loop.
#ifndef XLABIND_FFI_COMMON_NOOP_HANDLER_H_
#define XLABIND_FFI_COMMON_NOOP_HANDLER_H_

#include "xla/ffi/api/api.h"

extern "C" __attribute__((visibility("default")))
XLA_FFI_Error* XlabindNoop(XLA_FFI_CallFrame* call_frame);

#endif  // XLABIND_FFI_COMMON_NOOP_HANDLER_H_
