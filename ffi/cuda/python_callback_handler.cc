#include "xlabind/cuda/python_callback_handler.h"

#include <Python.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ffi/common/callback_state.h"
#include "ffi/common/python_call.h"
#include "ffi/cuda/cuda_driver.h"
#include "ffi/cuda/device_array.h"
#include "xlabind/native/call_status.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind {
namespace ffi = xla::ffi;
namespace {

struct Cuda {};
using CudaCallbackState = CallbackState<Cuda>;

struct CudaCall {
  uintptr_t stream;
  int32_t device;
  // XLA is capturing the stream into a CUDA graph (a command buffer): the
  // function runs now to record its work, which later replays run without it.
  bool capturing = false;
};

// The innermost CUDA callback running on this thread (callbacks may nest).
thread_local const CudaCall* current_call = nullptr;

class CurrentCallScope {
 public:
  explicit CurrentCallScope(const CudaCall* call) : previous_(current_call) { current_call = call; }
  ~CurrentCallScope() { current_call = previous_; }

 private:
  const CudaCall* previous_;
};

// The CUDA half of a call (python_call.h): DeviceArray views of device buffers.
struct CudaBuffers {
  static constexpr ViewList::Release kReleaseView = RecycleDeviceArray;

  CudaCall call;

  PyObject* View(const ffi::AnyBuffer& buffer, bool is_result) {
    auto dims = buffer.dimensions();
    return NewDeviceArray(reinterpret_cast<uintptr_t>(buffer.untyped_data()), dims.begin(),
                          dims.size(), static_cast<int>(buffer.element_type()), !is_result,
                          call.stream, call.device);
  }

  std::string Detach(ViewList& views, const std::vector<size_t>& escaped) {
    for (size_t i : escaped) ReleaseDeviceArray(views[i]);
    return "xlabind has released the kept device arrays (any further use is an error). "
           "Arrays other libraries made from them (CuPy, PyTorch) still hold XLA's address "
           "and must not be used. Keep or pass a copy instead (e.g. cupy.array(x)).";
  }

  ffi::Error Finish(ffi::RemainingRets, ViewList&, size_t, size_t) { return ffi::Error::Success(); }

  // Device memory: checking a result would cost a copy and a host sync per
  // call, so a CUDA function that writes its results must write them all.
  bool MarkUnwritten(PyObject*) { return false; }
  bool Unwritten(PyObject*) { return false; }

  // The status lives on the device: success is one byte set on XLA's stream;
  // a failure's message is copied there (the host already knows it).
  ffi::Error WriteStatus(ffi::AnyBuffer status, bool failed, const std::string& message) {
    const auto device_status = reinterpret_cast<uintptr_t>(status.untyped_data());
    std::string error;
    if (!failed) {
      error = cuda::SetBytes(device_status, 0, 1, call.stream);
    } else {
      std::vector<uint8_t> host(native::kStatusBytes);
      native::EncodeStatus(true, message, host.data());
      error = cuda::CopyHostToDevice(device_status, host.data(), host.size(), call.stream);
    }
    if (error.empty()) return ffi::Error::Success();
    // The status cannot travel: fail here, with the call's own message first.
    return ffi::Error::Internal(failed ? message + "\n(and " + error + ")" : error);
  }
};

// What every call does around the Python call: the device of XLA's stream
// made current, once, for the whole call (the runtime API that CuPy and
// PyTorch use then finds it; CuPy refuses a stream of another device, and
// the Python side needs no device context), the call readable from Python
// (CurrentCudaCall), and the CUDA half of python_call.h. Returns run(buffers).
template <typename Run>
auto OnXlaStream(const CudaCall& call, Run&& run) {
  cuda::ScopedStreamContext context(call.stream);
  CurrentCallScope scope(&call);
  CudaBuffers buffers{call};
  return run(buffers);
}

// After a call XLA captured (`nodes_before`: its graph's nodes before the
// call), "" or why the capture is wrong, to follow "xlabind callback 'name' ":
// a function that launched nothing
// leaves an empty graph, which newer XLA refuses in its own words ("Traced
// CUDA graph is empty") and older XLA replays as nothing.
std::string EmptyCaptureError(const CudaCall& call, size_t nodes_before) {
  if (!call.capturing || nodes_before == cuda::kUnknownCount) return "";
  size_t nodes_after = cuda::kUnknownCount;
  if (!cuda::CapturedNodes(call.stream, &nodes_after).empty() ||
      nodes_after == cuda::kUnknownCount || nodes_after > nodes_before) {
    return "";
  }
  return "launched no work on XLA's stream while XLA captured it into a CUDA graph "
         "(command_buffer_compatible=True). A captured function runs only at capture: it "
         "must launch its work (CuPy, PyTorch, a kernel) on the current stream. Bind a "
         "function that launches nothing, or only does host work, without "
         "command_buffer_compatible.";
}

// The key is an attribute of every stage (XLA decodes them all each time);
// only instantiate reads it: the state holds what it named.
ffi::Error Execute(void* stream, int32_t device, CudaCallbackState* state, uint64_t,
                   ffi::RemainingArgs args, ffi::RemainingRets rets) {
  return OnXlaStream({reinterpret_cast<uintptr_t>(stream), device}, [&](CudaBuffers& buffers) {
    return CallPython(*state->data, args, rets, rets.size(), buffers);
  });
}

ffi::Error ExecuteReportingStatus(void* stream, int32_t device, CudaCallbackState* state, uint64_t,
                                  ffi::RemainingArgs args, ffi::RemainingRets rets) {
  return OnXlaStream({reinterpret_cast<uintptr_t>(stream), device}, [&](CudaBuffers& buffers) {
    return CallPythonReportingStatus(*state->data, args, rets, buffers);
  });
}

// The capturable target's stage: the same call, registered with the
// command-buffer trait, so XLA may capture it into a CUDA graph. Only in-place
// functions are bound to it (python_functions.py): no result is copied and
// no status written, and nothing here waits for the device.
ffi::Error ExecuteCapturable(void* stream, int32_t device, CudaCallbackState* state, uint64_t,
                             ffi::RemainingArgs args, ffi::RemainingRets rets) {
  CudaCall call{reinterpret_cast<uintptr_t>(stream), device};
  std::string error = cuda::StreamIsCapturing(call.stream, &call.capturing);
  if (!error.empty()) return ffi::Error::Internal(error);
  size_t nodes_before = cuda::kUnknownCount;
  if (call.capturing) cuda::CapturedNodes(call.stream, &nodes_before);
  ffi::Error result = OnXlaStream(call, [&](CudaBuffers& buffers) {
    return CallPython(*state->data, args, rets, rets.size(), buffers);
  });
  if (result.failure()) return result;
  error = EmptyCaptureError(call, nodes_before);
  if (error.empty()) return result;
  return ffi::Error::Internal("xlabind callback '" + state->data->name + "' " + error);
}

std::string DetachCudaViews(void* platform, ViewList& views, const std::vector<size_t>& escaped) {
  return static_cast<CudaBuffers*>(platform)->Detach(views, escaped);
}

}  // namespace

double TimeCudaHostCalls(uint64_t key, const std::vector<HostCallBuffer>& buffers,
                         size_t num_operands, size_t calls, uintptr_t stream, int32_t device,
                         bool foreign_thread) {
  CallbackRef data = FindCallback(key);
  if (!data) throw std::invalid_argument("no callback is registered under this key");
  if (num_operands > buffers.size()) throw std::invalid_argument("more operands than buffers");
  std::string error;
  std::chrono::steady_clock::duration elapsed{};
  auto run = [&] {
    const auto start = std::chrono::steady_clock::now();
    for (size_t n = 0; n < calls && error.empty(); ++n) {
      CudaCall call{stream, device};
      cuda::StreamIsCapturing(stream, &call.capturing);  // no driver: not capturing
      size_t nodes_before = cuda::kUnknownCount;
      if (call.capturing) cuda::CapturedNodes(stream, &nodes_before);
      error = OnXlaStream(call, [&](CudaBuffers& platform) {
        GilScope gil;
        ViewList views(buffers.size(), num_operands, CudaBuffers::kReleaseView);
        for (size_t i = 0; i < buffers.size(); ++i) {
          const HostCallBuffer& b = buffers[i];
          PyObject* view = NewDeviceArray(b.data, b.dims.data(), b.dims.size(), b.element_type,
                                          i < num_operands, stream, device);
          if (view == nullptr) return TakePythonError();
          views.Add(view);
        }
        return InvokeAndCheck(*data, views, num_operands, DetachCudaViews, &platform);
      });
      if (error.empty()) error = EmptyCaptureError(call, nodes_before);
    }
    elapsed = std::chrono::steady_clock::now() - start;
  };
  {
    // As XLA calls the handler: without the GIL, which each call takes; on
    // this thread, or on one Python did not start (as XLA's own threads).
    PyThreadState* saved = PyEval_SaveThread();
    if (foreign_thread) {
      std::thread(run).join();
    } else {
      run();
    }
    PyEval_RestoreThread(saved);
  }
  if (!error.empty()) throw std::runtime_error("xlabind callback '" + data->name + "' " + error);
  return std::chrono::duration<double>(elapsed).count();
}

const XLA_FFI_TypeId* CudaCallbackStateTypeId() { return &CudaCallbackState::id; }
const XLA_FFI_TypeInfo* CudaCallbackStateTypeInfo() { return &CudaCallbackState::kTypeInfo; }

std::optional<std::pair<uintptr_t, int32_t>> CurrentCudaCall() {
  if (current_call == nullptr) return std::nullopt;
  return std::make_pair(current_call->stream, current_call->device);
}

bool CurrentCudaCallIsCapturing() { return current_call != nullptr && current_call->capturing; }

}  // namespace xlabind

XLA_FFI_DEFINE_HANDLER_SYMBOL(XlabindCudaPythonCallbackInstantiate,
                              xlabind::InstantiateCallback<xlabind::Cuda>,
                              xla::ffi::Ffi::BindInstantiate().Attr<uint64_t>("callback_key"));

namespace xlabind {
namespace {

// What both execute stages bind: XLA's stream and device, the state, the key.
auto ExecuteBinding() {
  return xla::ffi::Ffi::Bind()
      .Ctx<xla::ffi::PlatformStream<void*>>()
      .Ctx<xla::ffi::DeviceOrdinal>()
      .Ctx<xla::ffi::State<CudaCallbackState>>()
      .Attr<uint64_t>("callback_key")
      .RemainingArgs()
      .RemainingRets();
}

}  // namespace
}  // namespace xlabind

XLA_FFI_DEFINE_HANDLER_SYMBOL(XlabindCudaPythonCallback, xlabind::Execute,
                              xlabind::ExecuteBinding());

XLA_FFI_DEFINE_HANDLER_SYMBOL(XlabindCudaPythonCallbackReportingStatus,
                              xlabind::ExecuteReportingStatus, xlabind::ExecuteBinding());

XLA_FFI_DEFINE_HANDLER_SYMBOL(XlabindCudaPythonCallbackCapturable, xlabind::ExecuteCapturable,
                              xlabind::ExecuteBinding(), {xla::ffi::Traits::kCmdBufferCompatible});
