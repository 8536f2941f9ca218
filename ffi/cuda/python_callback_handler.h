// The CUDA XLA FFI handler (typed API, api_version=1) that runs a registered
// Python callable on XLA's device buffers and stream, without copying them.
//
// Operands arrive as read-only DeviceArray objects, results as writable ones
// (device_array.h), in the entry's call style (callback_registry.h). The
// stream and device of the call are also readable from Python through
// CurrentCudaCall() while it runs. Attribute: `callback_key` (u64), resolved
// once by the instantiate stage (callback_state.h).
//
// Needs no CUDA headers or runtime: XLA's stream is an opaque pointer here.
// xlabind registers them for platform "CUDA" like the CPU ones
// (cpu/python_callback_handler.h): "xlabind_python_callback" and
// "xlabind_python_callback_status", each with the instantiate stage.
#ifndef XLABIND_FFI_CUDA_PYTHON_CALLBACK_HANDLER_H_
#define XLABIND_FFI_CUDA_PYTHON_CALLBACK_HANDLER_H_

#include <cstdint>
#include <optional>
#include <utility>

#include "xla/ffi/api/api.h"

extern "C" {
__attribute__((visibility("default")))
XLA_FFI_Error* XlabindCudaPythonCallbackInstantiate(XLA_FFI_CallFrame* call_frame);
__attribute__((visibility("default")))
XLA_FFI_Error* XlabindCudaPythonCallback(XLA_FFI_CallFrame* call_frame);
__attribute__((visibility("default")))
XLA_FFI_Error* XlabindCudaPythonCallbackReportingStatus(XLA_FFI_CallFrame* call_frame);
}

namespace xlabind {

const XLA_FFI_TypeId* CudaCallbackStateTypeId();
const XLA_FFI_TypeInfo* CudaCallbackStateTypeInfo();

// (stream, device ordinal) of the CUDA callback running on this thread, if any.
std::optional<std::pair<uintptr_t, int32_t>> CurrentCudaCall();

}  // namespace xlabind

#endif  // XLABIND_FFI_CUDA_PYTHON_CALLBACK_HANDLER_H_
