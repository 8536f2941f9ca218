// The few CUDA driver calls the CUDA handler needs, looked up at first use in
// the driver library (libcuda.so.1) that every CUDA machine has. No CUDA
// headers or runtime are needed to build or load xlabind: on a machine
// without a GPU each call returns an error that says the driver is missing.
//
// Streams and device pointers are plain integers here (CUstream,
// CUdeviceptr); XLA hands the handler its stream as an opaque pointer.
#ifndef XLABIND_FFI_CUDA_CUDA_DRIVER_H_
#define XLABIND_FFI_CUDA_CUDA_DRIVER_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace xlabind::cuda {

// CUDA's special stream handles (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD).
constexpr uintptr_t kLegacyStream = 0x1;
constexpr uintptr_t kPerThreadStream = 0x2;

// Each returns "" on success, else a message naming the call and CUDA's error.
// Each runs in the context of the (non-special) stream it is given.
std::string CopyDeviceToDevice(uintptr_t dst, uintptr_t src, size_t bytes, uintptr_t stream);
// Copies host memory to the device on `stream`; `src` may be reused as soon
// as it returns (CUDA stages pageable memory before returning).
std::string CopyHostToDevice(uintptr_t dst, const void* src, size_t bytes, uintptr_t stream);
// Copies device memory to the host after the work on `stream`, and waits.
std::string CopyDeviceToHost(void* dst, uintptr_t src, size_t bytes, uintptr_t stream);
// Sets `bytes` bytes at `dst` to `value`, on `stream`.
std::string SetBytes(uintptr_t dst, uint8_t value, size_t bytes, uintptr_t stream);
std::string SynchronizeStream(uintptr_t stream);
// Waits for every stream of `stream`'s context (its device).
std::string SynchronizeContext(uintptr_t stream);
// Makes `waiter` wait (on the device, without blocking the host) for the work
// enqueued on `stream` so far. A no-op when they are the same stream.
std::string StreamWaitsFor(uintptr_t waiter, uintptr_t stream);

// Whether work on `stream` is being captured into a CUDA graph (XLA's
// command buffers capture a handler's stream). "" on success.
std::string StreamIsCapturing(uintptr_t stream, bool* capturing);

// How many nodes the graph being captured on `stream` holds so far (a
// capture may query its graph), or kUnknownCount where the stream is not
// capturing or the driver cannot say.
constexpr size_t kUnknownCount = static_cast<size_t>(-1);
std::string CapturedNodes(uintptr_t stream, size_t* count);

// Makes the context of `stream` (its device's) current on this thread for the
// scope, unless it is already: for the driver calls above, and for the
// runtime API (CuPy, PyTorch), which then takes it as the current device.
// XLA's handler thread need not have it current. Does nothing without a
// driver or for a special stream.
class ScopedStreamContext {
 public:
  explicit ScopedStreamContext(uintptr_t stream);
  ~ScopedStreamContext();
  ScopedStreamContext(const ScopedStreamContext&) = delete;
  ScopedStreamContext& operator=(const ScopedStreamContext&) = delete;

 private:
  bool pushed_ = false;
};

}  // namespace xlabind::cuda

#endif  // XLABIND_FFI_CUDA_CUDA_DRIVER_H_
