// Scratch memory for the length of one call, one helper for every platform:
// XLA's allocator on GPUs (bind `.Ctx<xla::ffi::ScratchAllocator>()` and pass
// its address), whose memory XLA reuses in stream order once the call's work
// is done, so a kernel launched by the handler may still use it after the
// handler returns; plain host memory on the CPU (construct with nothing),
// freed when the Scratch goes out of scope, i.e. before the handler returns.
//
//   native::Scratch scratch(&allocator);            // CUDA handler
//   native::Scratch scratch;                        // CPU handler
//   XLABIND_ASSIGN_OR_RETURN(float* tmp, scratch.Allocate<float>("my_op", n));
#ifndef XLABIND_FFI_NATIVE_SCRATCH_H_
#define XLABIND_FFI_NATIVE_SCRATCH_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "xlabind/native/errors.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind::native {

// Scratch memory for one call: XLA's allocator on GPUs (construct it with
// the address of the bound `.Ctx<xla::ffi::ScratchAllocator>()`), plain host
// memory on the CPU (construct it with nothing). `Allocate<T>(op, count)`
// returns room for `count` values of T (uninitialized, aligned) or an error
// naming `op` and the size.
//
// Example:
//   native::Scratch scratch;  // CPU handler; CUDA: scratch(&allocator)
//   XLABIND_ASSIGN_OR_RETURN(float* tmp, scratch.Allocate<float>("my_op", n));
class Scratch {
 public:
  // Host memory (CPU handlers).
  Scratch() = default;
  // XLA's device allocator (GPU handlers); it must outlive this Scratch.
  explicit Scratch(xla::ffi::ScratchAllocator* device) : device_(device) {}

  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  // Room for `count` values of T, aligned for T (64 bytes on the host, for
  // vector loads). Uninitialized. An error names `op` and the size.
  template <typename T>
  xla::ffi::ErrorOr<T*> Allocate(const char* op, size_t count) {
    const size_t bytes = count * sizeof(T);
    if (count != 0 && bytes / count != sizeof(T)) return Failed<T>(op, count, "overflows");
    if (device_ != nullptr) {
      std::optional<void*> memory = device_->Allocate(bytes, alignof(T));
      if (!memory.has_value() || (*memory == nullptr && bytes != 0)) {
        return Failed<T>(op, count, "could not be allocated by XLA's scratch allocator");
      }
      return static_cast<T*>(*memory);
    }
    void* memory =
        ::operator new(bytes == 0 ? 1 : bytes, std::align_val_t{kHostAlignment}, std::nothrow);
    if (memory == nullptr) return Failed<T>(op, count, "could not be allocated");
    host_.emplace_back(memory);
    return static_cast<T*>(memory);
  }

 private:
  static constexpr size_t kHostAlignment = 64;
  struct HostDeleter {
    void operator()(void* memory) const {
      ::operator delete(memory, std::align_val_t{kHostAlignment});
    }
  };

  template <typename T>
  static xla::ffi::ErrorOr<T*> Failed(const char* op, size_t count, const char* why) {
    return xla::ffi::Unexpected<xla::ffi::Error>(xla::ffi::Error(
        xla::ffi::ErrorCode::kResourceExhausted, std::string(op) + ": scratch memory for " +
                                                     std::to_string(count) + " values of " +
                                                     std::to_string(sizeof(T)) + " bytes " + why));
  }

  xla::ffi::ScratchAllocator* device_ = nullptr;
  std::vector<std::unique_ptr<void, HostDeleter>> host_;
};

}  // namespace xlabind::native

#endif  // XLABIND_FFI_NATIVE_SCRATCH_H_
