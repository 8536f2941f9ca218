// Native FFI handlers that do the least a call can: nothing (the floor every
// callback path is measured against, tools/benchmarks/main.py, and a target for
// primitive tests that need no Python in the loop), and a copy of the first
// operand into the first result on the CPU (the floor of a callback that
// writes its result).
#ifndef XLABIND_FFI_COMMON_NOOP_HANDLER_H_
#define XLABIND_FFI_COMMON_NOOP_HANDLER_H_

#include "xla/ffi/api/api.h"

extern "C" __attribute__((visibility("default"))) XLA_FFI_Error* XlabindNoop(
    XLA_FFI_CallFrame* call_frame);

extern "C" __attribute__((visibility("default"))) XLA_FFI_Error* XlabindCpuCopy(
    XLA_FFI_CallFrame* call_frame);

#endif  // XLABIND_FFI_COMMON_NOOP_HANDLER_H_
