// The CPU status check of sharded programs (native/call_status.h): operands
// are the gathered statuses (u8[rows, kStatusBytes] or u8[kStatusBytes]) and
// the call's results, which it returns unchanged (aliased: no copy). It fails
// with the first failure's message when any row failed, so every device
// stops at the same point. xlabind registers it for platform "cpu" as
// "xlabind_check_status".
#ifndef XLABIND_FFI_CPU_STATUS_CHECK_HANDLER_H_
#define XLABIND_FFI_CPU_STATUS_CHECK_HANDLER_H_

#include "xla/ffi/api/api.h"

extern "C" __attribute__((visibility("default"))) XLA_FFI_Error* XlabindCpuCheckStatus(
    XLA_FFI_CallFrame* call_frame);

#endif  // XLABIND_FFI_CPU_STATUS_CHECK_HANDLER_H_
