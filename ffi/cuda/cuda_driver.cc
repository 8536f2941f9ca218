#include "ffi/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

namespace xlabind::cuda {
namespace {

using Result = int;  // CUresult
using Stream = void*;
using Event = void*;
using Context = void*;

// CU_EVENT_DISABLE_TIMING: the cheapest event, for ordering only.
constexpr unsigned kEventDisableTiming = 0x2;

struct Driver {
  std::string missing;  // why the driver is unusable, or ""
  Result (*init)(unsigned) = nullptr;
  Result (*get_error_string)(Result, const char**) = nullptr;
  Result (*memcpy_dtod_async)(unsigned long long, unsigned long long, size_t, Stream) = nullptr;
  Result (*memcpy_htod_async)(unsigned long long, const void*, size_t, Stream) = nullptr;
  Result (*memcpy_dtoh_async)(void*, unsigned long long, size_t, Stream) = nullptr;
  Result (*memset_d8_async)(unsigned long long, unsigned char, size_t, Stream) = nullptr;
  Result (*stream_synchronize)(Stream) = nullptr;
  Result (*ctx_synchronize)() = nullptr;
  Result (*event_create)(Event*, unsigned) = nullptr;
  Result (*event_record)(Event, Stream) = nullptr;
  Result (*stream_wait_event)(Stream, Event, unsigned) = nullptr;
  Result (*event_destroy)(Event) = nullptr;
  Result (*stream_get_ctx)(Stream, Context*) = nullptr;
  Result (*ctx_push_current)(Context) = nullptr;
  Result (*ctx_pop_current)(Context*) = nullptr;
  Result (*ctx_get_current)(Context*) = nullptr;
  Result (*stream_is_capturing)(Stream, int*) = nullptr;
  // Optional: the graph a capture records into (a driver without them still
  // serves everything else).
  Result (*stream_get_capture_info)(Stream, int*, unsigned long long*, void**, const void**,
                                    size_t*) = nullptr;
  Result (*graph_get_nodes)(void*, void*, size_t*) = nullptr;
};

template <typename Fn>
bool Find(void* library, const char* name, Fn*& fn, std::string& missing) {
  fn = reinterpret_cast<Fn*>(dlsym(library, name));
  if (fn == nullptr && missing.empty()) missing = std::string("libcuda.so.1 lacks ") + name;
  return fn != nullptr;
}

const Driver& GetDriver() {
  static Driver driver;
  static std::once_flag once;
  std::call_once(once, [] {
    void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      driver.missing = "the CUDA driver (libcuda.so.1) is not installed on this machine";
      return;
    }
    Find(library, "cuInit", driver.init, driver.missing);
    Find(library, "cuGetErrorString", driver.get_error_string, driver.missing);
    Find(library, "cuMemcpyDtoDAsync_v2", driver.memcpy_dtod_async, driver.missing);
    Find(library, "cuMemcpyHtoDAsync_v2", driver.memcpy_htod_async, driver.missing);
    Find(library, "cuMemcpyDtoHAsync_v2", driver.memcpy_dtoh_async, driver.missing);
    Find(library, "cuMemsetD8Async", driver.memset_d8_async, driver.missing);
    Find(library, "cuStreamSynchronize", driver.stream_synchronize, driver.missing);
    Find(library, "cuCtxSynchronize", driver.ctx_synchronize, driver.missing);
    Find(library, "cuEventCreate", driver.event_create, driver.missing);
    Find(library, "cuEventRecord", driver.event_record, driver.missing);
    Find(library, "cuStreamWaitEvent", driver.stream_wait_event, driver.missing);
    Find(library, "cuEventDestroy_v2", driver.event_destroy, driver.missing);
    Find(library, "cuStreamGetCtx", driver.stream_get_ctx, driver.missing);
    Find(library, "cuCtxPushCurrent_v2", driver.ctx_push_current, driver.missing);
    Find(library, "cuCtxPopCurrent_v2", driver.ctx_pop_current, driver.missing);
    Find(library, "cuCtxGetCurrent", driver.ctx_get_current, driver.missing);
    Find(library, "cuStreamIsCapturing", driver.stream_is_capturing, driver.missing);
    std::string optional;
    Find(library, "cuStreamGetCaptureInfo_v2", driver.stream_get_capture_info, optional);
    Find(library, "cuGraphGetNodes", driver.graph_get_nodes, optional);
    if (driver.missing.empty() && driver.init(0) != 0) driver.missing = "cuInit failed";
  });
  return driver;
}

std::string Check(const Driver& driver, Result result, const char* call) {
  if (result == 0) return "";
  const char* text = nullptr;
  if (driver.get_error_string == nullptr || driver.get_error_string(result, &text) != 0) {
    text = "unknown error";
  }
  return std::string("xlabind: ") + call + " failed: " + text + " (CUDA error " +
         std::to_string(result) + ")";
}

Stream AsStream(uintptr_t stream) { return reinterpret_cast<Stream>(stream); }

}  // namespace

std::string CopyDeviceToDevice(uintptr_t dst, uintptr_t src, size_t bytes, uintptr_t stream) {
  const Driver& d = GetDriver();
  if (!d.missing.empty()) return "xlabind: " + d.missing;
  if (bytes == 0) return "";
  ScopedStreamContext context(stream);
  return Check(d, d.memcpy_dtod_async(dst, src, bytes, AsStream(stream)), "cuMemcpyDtoDAsync");
}

std::string CopyHostToDevice(uintptr_t dst, const void* src, size_t bytes, uintptr_t stream) {
  const Driver& d = GetDriver();
  if (!d.missing.empty()) return "xlabind: " + d.missing;
  if (bytes == 0) return "";
  ScopedStreamContext context(stream);
  return Check(d, d.memcpy_htod_async(dst, src, bytes, AsStream(stream)), "cuMemcpyHtoDAsync");
}

std::string CopyDeviceToHost(void* dst, uintptr_t src, size_t bytes, uintptr_t stream) {
  const Driver& d = GetDriver();
  if (!d.missing.empty()) return "xlabind: " + d.missing;
  if (bytes == 0) return "";
  ScopedStreamContext context(stream);
  std::string error =
      Check(d, d.memcpy_dtoh_async(dst, src, bytes, AsStream(stream)), "cuMemcpyDtoHAsync");
  if (!error.empty()) return error;
  return Check(d, d.stream_synchronize(AsStream(stream)), "cuStreamSynchronize");
}

std::string SetBytes(uintptr_t dst, uint8_t value, size_t bytes, uintptr_t stream) {
  const Driver& d = GetDriver();
  if (!d.missing.empty()) return "xlabind: " + d.missing;
  if (bytes == 0) return "";
  ScopedStreamContext context(stream);
  return Check(d, d.memset_d8_async(dst, value, bytes, AsStream(stream)), "cuMemsetD8Async");
}

std::string SynchronizeStream(uintptr_t stream) {
  const Driver& d = GetDriver();
  if (!d.missing.empty()) return "xlabind: " + d.missing;
  ScopedStreamContext context(stream);
  return Check(d, d.stream_synchronize(AsStream(stream)), "cuStreamSynchronize");
}

std::string SynchronizeContext(uintptr_t stream) {
  const Driver& d = GetDriver();
  if (!d.missing.empty()) return "xlabind: " + d.missing;
  ScopedStreamContext context(stream);
  return Check(d, d.ctx_synchronize(), "cuCtxSynchronize");
}

std::string StreamWaitsFor(uintptr_t waiter, uintptr_t stream) {
  if (waiter == stream) return "";
  const Driver& d = GetDriver();
  if (!d.missing.empty()) return "xlabind: " + d.missing;
  ScopedStreamContext context(stream > kPerThreadStream ? stream : waiter);
  Event event = nullptr;
  std::string error = Check(d, d.event_create(&event, kEventDisableTiming), "cuEventCreate");
  if (!error.empty()) return error;
  error = Check(d, d.event_record(event, AsStream(stream)), "cuEventRecord");
  if (error.empty()) {
    error = Check(d, d.stream_wait_event(AsStream(waiter), event, 0), "cuStreamWaitEvent");
  }
  d.event_destroy(event);  // released once the wait has been satisfied
  return error;
}

std::string StreamIsCapturing(uintptr_t stream, bool* capturing) {
  *capturing = false;
  const Driver& d = GetDriver();
  if (!d.missing.empty()) return "xlabind: " + d.missing;
  int status = 0;  // CU_STREAM_CAPTURE_STATUS_NONE; 1 active, 2 invalidated
  std::string error =
      Check(d, d.stream_is_capturing(AsStream(stream), &status), "cuStreamIsCapturing");
  *capturing = status != 0;
  return error;
}

std::string CapturedNodes(uintptr_t stream, size_t* count) {
  *count = kUnknownCount;
  const Driver& d = GetDriver();
  if (!d.missing.empty()) return "xlabind: " + d.missing;
  if (d.stream_get_capture_info == nullptr || d.graph_get_nodes == nullptr) return "";
  int status = 0;
  void* graph = nullptr;
  const void* dependencies = nullptr;
  size_t num_dependencies = 0;
  std::string error = Check(d,
                            d.stream_get_capture_info(AsStream(stream), &status, nullptr, &graph,
                                                      &dependencies, &num_dependencies),
                            "cuStreamGetCaptureInfo");
  if (!error.empty() || status != 1 || graph == nullptr) return error;
  size_t nodes = 0;
  error = Check(d, d.graph_get_nodes(graph, nullptr, &nodes), "cuGraphGetNodes");
  if (error.empty()) *count = nodes;
  return error;
}

ScopedStreamContext::ScopedStreamContext(uintptr_t stream) {
  const Driver& d = GetDriver();
  Context context = nullptr;
  if (!d.missing.empty() || stream <= kPerThreadStream ||
      d.stream_get_ctx(AsStream(stream), &context) != 0 || context == nullptr) {
    return;
  }
  Context current = nullptr;
  if (d.ctx_get_current(&current) == 0 && current == context) return;  // current already
  pushed_ = d.ctx_push_current(context) == 0;
}

ScopedStreamContext::~ScopedStreamContext() {
  if (!pushed_) return;
  Context popped = nullptr;
  GetDriver().ctx_pop_current(&popped);
}

}  // namespace xlabind::cuda
