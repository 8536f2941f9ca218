// The CUDA status check of sharded programs: like the CPU one
// (cpu/status_check_handler.h), but the statuses are on the device, so it
// waits for XLA's stream to copy them to the host (a few KiB) before it can
// decide: the one host synchronization of a multi-device GPU program's
// Python call. xlabind registers it for platform "CUDA" as
// "xlabind_check_status".
#ifndef XLABIND_FFI_CUDA_STATUS_CHECK_HANDLER_H_
#define XLABIND_FFI_CUDA_STATUS_CHECK_HANDLER_H_

#include "xla/ffi/api/api.h"

extern "C" __attribute__((visibility("default"))) XLA_FFI_Error* XlabindCudaCheckStatus(
    XLA_FFI_CallFrame* call_frame);

#endif  // XLABIND_FFI_CUDA_STATUS_CHECK_HANDLER_H_
