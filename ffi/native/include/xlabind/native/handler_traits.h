// Handler traits XLA reads when a handler is registered, added to a handler
// that was defined without them. xlabind_extension's `command_buffer = True`
// wraps a CUDA handler this way, so that XLA may capture it into a CUDA graph
// (command buffer): only for a handler that launches the same device work on
// every call, with no host synchronization and nothing done on the host that
// a replay would skip. Handlers that run Python never qualify: xlabind's own
// Python-callback handlers report no traits.
#ifndef XLABIND_FFI_NATIVE_HANDLER_TRAITS_H_
#define XLABIND_FFI_NATIVE_HANDLER_TRAITS_H_

#include <cstdint>

#include "xla/ffi/api/c_api.h"

namespace xlabind::native {

// Calls `inner`; when XLA asks for the handler's metadata (at
// registration), adds `traits` to what `inner` reports.
//
// Args:
//   inner: the handler.
//   traits: XLA_FFI_Handler_TraitsBits to add (command-buffer compatibility).
//   frame: the call frame XLA passed.
// Returns:
//   What `inner` returns.
// Example:
//   constexpr uint32_t kTraits = XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE;
//   return CallWithTraits(MyOpCuda, kTraits, frame);
inline XLA_FFI_Error* CallWithTraits(XLA_FFI_Handler* inner, uint32_t traits,
                                     XLA_FFI_CallFrame* frame) {
  XLA_FFI_Error* error = inner(frame);
  auto* extension = frame->extension_start;  // the header's base type was renamed in API 0.4
  if (error == nullptr && extension != nullptr && extension->type == XLA_FFI_Extension_Metadata) {
    reinterpret_cast<XLA_FFI_Metadata_Extension*>(extension)->metadata->traits |= traits;
  }
  return error;
}

}  // namespace xlabind::native

#endif  // XLABIND_FFI_NATIVE_HANDLER_TRAITS_H_
