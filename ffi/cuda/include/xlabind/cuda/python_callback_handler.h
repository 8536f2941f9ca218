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
// (xlabind/cpu/python_callback_handler.h): "xlabind_python_callback" and
// "xlabind_python_callback_status", each with the instantiate stage; and
// "xlabind_python_callback_graph", the same call with the command-buffer trait
// (XLA may capture it into a CUDA graph), for in-place functions declared
// command_buffer_compatible.
#ifndef XLABIND_FFI_CUDA_PYTHON_CALLBACK_HANDLER_H_
#define XLABIND_FFI_CUDA_PYTHON_CALLBACK_HANDLER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "xla/ffi/api/api.h"

extern "C" {
__attribute__((visibility("default"))) XLA_FFI_Error* XlabindCudaPythonCallbackInstantiate(
    XLA_FFI_CallFrame* call_frame);
__attribute__((visibility("default"))) XLA_FFI_Error* XlabindCudaPythonCallback(
    XLA_FFI_CallFrame* call_frame);
__attribute__((visibility("default"))) XLA_FFI_Error* XlabindCudaPythonCallbackReportingStatus(
    XLA_FFI_CallFrame* call_frame);
__attribute__((visibility("default"))) XLA_FFI_Error* XlabindCudaPythonCallbackCapturable(
    XLA_FFI_CallFrame* call_frame);
}

namespace xlabind {

const XLA_FFI_TypeId* CudaCallbackStateTypeId();
const XLA_FFI_TypeInfo* CudaCallbackStateTypeInfo();

// (stream, device ordinal) of the CUDA callback running on this thread, if any.
std::optional<std::pair<uintptr_t, int32_t>> CurrentCudaCall();

// Whether the CUDA callback running on this thread is being captured into a
// CUDA graph (only the capturable target asks; false outside calls).
bool CurrentCudaCallIsCapturing();

// For the host-path benchmark (tools/benchmarks/cuda_host.py) and its tests:
// `calls` calls of the callback registered under `key`, each made as the
// handler makes it (the GIL taken, views, the call, the escape check, the
// views kept for reuse) but on buffers that are only addresses and with no
// XLA frame to decode; without a GPU the driver is absent, so no context is
// pushed (tests/runtime/test_fake_driver.py loads a stand-in for it). Asks
// the driver whether `stream` is being captured, as the capturable stage does. The first
// `num_operands` buffers are the operands. Returns the seconds taken; throws with the callback's
// error if a call fails. Requires the GIL (released while the calls run, as XLA runs them).
// `foreign_thread`: the calls run on a new std::thread, as on XLA's own threads, which Python did
// not start.
struct HostCallBuffer {
  uintptr_t data;
  std::vector<int64_t> dims;
  int element_type;
};
double TimeCudaHostCalls(uint64_t key, const std::vector<HostCallBuffer>& buffers,
                         size_t num_operands, size_t calls, uintptr_t stream, int32_t device,
                         bool foreign_thread);

}  // namespace xlabind

#endif  // XLABIND_FFI_CUDA_PYTHON_CALLBACK_HANDLER_H_
