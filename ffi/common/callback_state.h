// What keeps a Python callback alive for a compiled executable: the state of
// the callback handler's instantiate stage.
//
// XLA runs a handler's instantiate stage once per call site when it builds
// the executable's custom-call thunk (at compile time, without the GIL), and
// keeps the state it returns as long as the thunk: through every execution,
// in flight or queued, whatever Python drops meanwhile. The state holds a
// CallbackRef (callback_registry.h), so the execute stage reads the callable
// from it and never looks the key up again. jaxlib's own CPU callbacks are
// kept the same way: by the executable, on the C++ side.
//
// Each platform has a type of its own (`Platform` is a tag): a PJRT plugin
// (CUDA) keeps a type registry of its own, with ids of its own.
#ifndef XLABIND_FFI_COMMON_CALLBACK_STATE_H_
#define XLABIND_FFI_COMMON_CALLBACK_STATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "ffi/common/callback_registry.h"
#include "xlabind/native/state.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind {

// A state type like any handler author's (xlabind/native/state.h): its id is
// assigned when jax.ffi.register_ffi_type registers it.
template <typename Platform>
struct CallbackState : native::State<CallbackState<Platform>> {
  explicit CallbackState(CallbackRef data) : data(std::move(data)) {}
  CallbackRef data;
};

// The error for a key that names no live callback: a program lowered from a
// registry entry that has been dropped, or an executable whose program this
// process never lowered.
inline xla::ffi::Error MissingCallbackError(uint64_t key) {
  return xla::ffi::Error(
      xla::ffi::ErrorCode::kNotFound,
      "xlabind: no live Python callback with key " + std::to_string(key) +
          ": the program was lowered from a registry entry that no longer exists, or "
          "in another process only. Programs that call Python functions must be lowered "
          "in the process that runs them, while their functions live.");
}

// The instantiate stage of every platform's callback handler.
template <typename Platform>
xla::ffi::ErrorOr<std::unique_ptr<CallbackState<Platform>>> InstantiateCallback(uint64_t key) {
  CallbackRef data = FindCallback(key);
  if (data == nullptr) return xla::ffi::Unexpected<xla::ffi::Error>(MissingCallbackError(key));
  return std::make_unique<CallbackState<Platform>>(std::move(data));
}

}  // namespace xlabind

#endif  // XLABIND_FFI_COMMON_CALLBACK_STATE_H_
