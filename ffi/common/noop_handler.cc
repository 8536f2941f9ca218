#include "ffi/common/noop_handler.h"

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

XLA_FFI_DEFINE_HANDLER_SYMBOL(XlabindNoop,
                              [](ffi::RemainingArgs, ffi::RemainingRets) {
                                return ffi::Error::Success();
                              },
                              ffi::Ffi::Bind().RemainingArgs().RemainingRets());
