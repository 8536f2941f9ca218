#include "ffi/cuda/copy_handler.h"

#include <string>

#include "ffi/cuda/cuda_driver.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

ffi::Error CopyOnStream(void* stream, ffi::AnyBuffer in, ffi::Result<ffi::AnyBuffer> out) {
  if (in.size_bytes() != out->size_bytes()) {
    return ffi::Error::InvalidArgument("xlabind_cuda_copy: operand and result sizes differ");
  }
  std::string error =
      xlabind::cuda::CopyDeviceToDevice(reinterpret_cast<uintptr_t>(out->untyped_data()),
                                        reinterpret_cast<uintptr_t>(in.untyped_data()),
                                        in.size_bytes(), reinterpret_cast<uintptr_t>(stream));
  if (!error.empty()) return ffi::Error::Internal(error);
  return ffi::Error::Success();
}

}  // namespace

// One asynchronous copy: capturable into a CUDA graph.
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    XlabindCudaCopy, CopyOnStream,
    ffi::Ffi::Bind().Ctx<ffi::PlatformStream<void*>>().Arg<ffi::AnyBuffer>().Ret<ffi::AnyBuffer>(),
    {ffi::Traits::kCmdBufferCompatible});
