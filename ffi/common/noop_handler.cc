#include "ffi/common/noop_handler.h"

#include <cstring>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    XlabindNoop, [](ffi::RemainingArgs, ffi::RemainingRets) { return ffi::Error::Success(); },
    ffi::Ffi::Bind().RemainingArgs().RemainingRets());

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    XlabindCpuCopy,
    [](ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y) {
      if (y->size_bytes() != x.size_bytes()) {
        return ffi::Error::InvalidArgument("xlabind_copy: the result's size is not the operand's");
      }
      std::memcpy(y->untyped_data(), x.untyped_data(), x.size_bytes());
      return ffi::Error::Success();
    },
    ffi::Ffi::Bind().Arg<ffi::AnyBuffer>().Ret<ffi::AnyBuffer>());
