#include "ffi/cpu/status_check_handler.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "xlabind/native/call_status.h"
#include "xla/ffi/api/ffi.h"

namespace {
namespace ffi = xla::ffi;

ffi::Error CheckStatus(ffi::AnyBuffer statuses, ffi::RemainingArgs values, ffi::RemainingRets outs,
                       ffi::Span<const int64_t> processes) {
  const std::string failure = xlabind::native::FirstFailure(
      static_cast<const uint8_t*>(statuses.untyped_data()),
      statuses.size_bytes() / xlabind::native::kStatusBytes, processes.begin(), processes.size());
  if (!failure.empty()) return ffi::Error(ffi::ErrorCode::kAborted, failure);
  // The results are aliased to the values; copy only where XLA did not.
  for (size_t i = 0; i < values.size() && i < outs.size(); ++i) {
    auto in = values.get<ffi::AnyBuffer>(i);
    auto out = outs.get<ffi::AnyBuffer>(i);
    if (in.has_error() || out.has_error()) return ffi::Error::Internal("xlabind: bad buffer");
    if ((*out)->untyped_data() != in->untyped_data() && in->size_bytes() > 0) {
      std::memcpy((*out)->untyped_data(), in->untyped_data(), in->size_bytes());
    }
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(XlabindCpuCheckStatus, CheckStatus,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  .Attr<ffi::Span<const int64_t>>("processes"));
