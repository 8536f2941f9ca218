#include "ffi/cuda/status_check_handler.h"

#include <cstdint>
#include <string>
#include <vector>

#include "ffi/cuda/cuda_driver.h"
#include "xlabind/native/call_status.h"
#include "xla/ffi/api/ffi.h"

namespace {
namespace ffi = xla::ffi;

ffi::Error CheckStatus(void* stream_ptr, ffi::AnyBuffer statuses, ffi::RemainingArgs values,
                       ffi::RemainingRets outs, ffi::Span<const int64_t> processes) {
  const auto stream = reinterpret_cast<uintptr_t>(stream_ptr);
  std::vector<uint8_t> host(statuses.size_bytes());
  std::string error = xlabind::cuda::CopyDeviceToHost(
      host.data(), reinterpret_cast<uintptr_t>(statuses.untyped_data()), host.size(), stream);
  if (!error.empty()) return ffi::Error::Internal(error);
  const std::string failure =
      xlabind::native::FirstFailure(host.data(), host.size() / xlabind::native::kStatusBytes,
                                    processes.begin(), processes.size());
  if (!failure.empty()) return ffi::Error(ffi::ErrorCode::kAborted, failure);
  // The results are aliased to the values; copy only where XLA did not.
  for (size_t i = 0; i < values.size() && i < outs.size(); ++i) {
    auto in = values.get<ffi::AnyBuffer>(i);
    auto out = outs.get<ffi::AnyBuffer>(i);
    if (in.has_error() || out.has_error()) return ffi::Error::Internal("xlabind: bad buffer");
    if ((*out)->untyped_data() != in->untyped_data()) {
      error = xlabind::cuda::CopyDeviceToDevice(reinterpret_cast<uintptr_t>((*out)->untyped_data()),
                                                reinterpret_cast<uintptr_t>(in->untyped_data()),
                                                in->size_bytes(), stream);
      if (!error.empty()) return ffi::Error::Internal(error);
    }
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(XlabindCudaCheckStatus, CheckStatus,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<void*>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  .Attr<ffi::Span<const int64_t>>("processes"));
