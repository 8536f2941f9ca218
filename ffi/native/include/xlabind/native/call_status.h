// A call's status as data, so that a failure on one device of a sharded
// program can travel through the program's collectives to every device, and
// every device can stop at the same point instead of waiting in a collective
// for the one that failed.
//
// The status is one more result of the call: kStatusBytes bytes (u8), byte 0
// nonzero on failure, then the error message (UTF-8, NUL-terminated, cut to
// fit). Zeros are success, so the status of a call made on one device only
// can be summed with the zeros of the others and stays exact. xlabind's
// status check (target "xlabind_check_status") reads one or more such rows on
// every device and fails them all with the first failure's message.
//
// `CallReportingStatus` turns any FFI handler whose results are in host
// memory (CPU) into one that reports its error this way instead of returning
// it: xlabind_extension registers such a variant of every CPU handler, under
// the target's name + kStatusTargetSuffix.
#ifndef XLABIND_FFI_NATIVE_CALL_STATUS_H_
#define XLABIND_FFI_NATIVE_CALL_STATUS_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "xla/ffi/api/api.h"

namespace xlabind::native {

// The size in bytes of a call's status, the u8 result a status-reporting
// target writes (CallReportingStatus).
inline constexpr size_t kStatusBytes = 4096;
// What a target's status-reporting variant is called: the target's name and
// this suffix.
inline constexpr const char kStatusTargetSuffix[] = ".xlabind_status";

// Writes a call's status. A message too long keeps its start and its end,
// where Python puts the exception itself.
//
// Args:
//   failed: whether the call failed.
//   message: why it failed (ignored when it did not).
//   status: kStatusBytes of host memory to write.
// Example:
//   EncodeStatus(true, "my_op: x must be finite", status);
inline void EncodeStatus(bool failed, const std::string& message, uint8_t* status) {
  status[0] = failed ? 1 : 0;
  if (!failed) return;
  constexpr size_t kRoom = kStatusBytes - 2;  // the flag and the final NUL
  std::string text = message;
  if (text.size() > kRoom) {
    const std::string cut = "\n[...]\n";
    const size_t head = kRoom / 3;
    text = text.substr(0, head) + cut + text.substr(text.size() - (kRoom - head - cut.size()));
  }
  std::memcpy(status + 1, text.data(), text.size());
  status[1 + text.size()] = 0;
}

// The message of a status that EncodeStatus wrote.
//
// Args:
//   status: kStatusBytes of host memory.
// Returns:
//   The failure's message, or "" when the call succeeded.
// Example:
//   if (std::string why = DecodeStatus(status); !why.empty()) return Internal(why);
inline std::string DecodeStatus(const uint8_t* status) {
  if (status[0] == 0) return "";
  const char* text = reinterpret_cast<const char*>(status + 1);
  return std::string(text, strnlen(text, kStatusBytes - 1));
}

// The error to stop every device with, from the statuses of the calls that
// ran: the first failure's message and where it happened.
//
// Args:
//   statuses: `rows` statuses of kStatusBytes each, as the program gathered them.
//   rows: how many calls ran (one status each).
//   processes: when it has one entry per row, the process each row's device
//     belongs to (programs over several processes, jax.distributed); may be null.
//   num_processes: how many entries `processes` has.
// Returns:
//   The message, or "" when every call succeeded.
// Example:
//   std::string why = FirstFailure(statuses, devices);
inline std::string FirstFailure(const uint8_t* statuses, size_t rows,
                                const int64_t* processes = nullptr, size_t num_processes = 0) {
  size_t failed = 0, first = rows;
  for (size_t r = 0; r < rows; ++r) {
    if (statuses[r * kStatusBytes] != 0 && failed++ == 0) first = r;
  }
  if (failed == 0) return "";
  const std::string process = processes != nullptr && num_processes == rows
                                  ? " (process " + std::to_string(processes[first]) + ")"
                                  : "";
  std::string where;
  if (rows == 1) {
    where = "the call ran once, on the program's first device" + process;
  } else {
    // The row's index, not a jax device id: rows follow the mesh's devices
    // (along the call's axes), which need not be jax's order.
    where = "on device " + std::to_string(first) + process + " of the " + std::to_string(rows) +
            " that ran the call, counted in the mesh's device order";
    if (failed > 1) where += " (" + std::to_string(failed) + " of them failed; this is the first)";
  }
  return DecodeStatus(statuses + first * kStatusBytes) + "\n(xlabind: " + where +
         "; every device of the sharded program stopped at this call.)";
}

namespace internal {

// The error's message (XLA's own helpers: the C API behind them was renamed
// in XLA FFI 0.5), and the error destroyed.
inline std::string TakeErrorMessage(const XLA_FFI_Api* api, XLA_FFI_Error* error) {
  const char* message = ::xla::ffi::internal::GetErrorMessage(api, error);
  std::string text = message != nullptr ? message : "unknown error";
  ::xla::ffi::internal::DestroyError(api, error);
  return text;
}

}  // namespace internal

// Calls `handler` with every result of `frame` but the last, which must be
// the status (u8[kStatusBytes], host memory), and writes its outcome there
// instead of returning an error. An asynchronous handler's own future is
// handed on unchanged (its errors are not caught).
//
// Args:
//   handler: the target's own handler.
//   name: the target's name, in messages.
//   frame: the call frame XLA passed.
// Returns:
//   What XLA expects of a handler: null, or an error of the call itself.
// Example:
//   return CallReportingStatus(MyOpCpu, "my_op", frame);
inline XLA_FFI_Error* CallReportingStatus(XLA_FFI_Handler* handler, const char* name,
                                          XLA_FFI_CallFrame* frame) {
  // XLA asks a handler for its metadata (API version, traits) with a frame of
  // its own; that, and every stage but execute, is the inner handler's.
  const bool metadata = frame->extension_start != nullptr &&
                        frame->extension_start->type == XLA_FFI_Extension_Metadata;
  if (metadata || frame->stage != XLA_FFI_ExecutionStage_EXECUTE || frame->rets.size < 1) {
    return handler(frame);
  }
  auto* status_buffer = static_cast<XLA_FFI_Buffer*>(frame->rets.rets[frame->rets.size - 1]);
  auto* status = static_cast<uint8_t*>(status_buffer->data);
  XLA_FFI_CallFrame inner{};
  std::memcpy(&inner, frame, std::min(frame->struct_size, sizeof(inner)));
  inner.rets.size = frame->rets.size - 1;
  XLA_FFI_Error* error = handler(&inner);
  frame->future = inner.future;
  if (error == nullptr) {
    EncodeStatus(false, "", status);
    return nullptr;
  }
  EncodeStatus(true,
               std::string("xlabind: native target '") + name +
                   "' failed: " + internal::TakeErrorMessage(frame->api, error),
               status);
  return nullptr;
}

}  // namespace xlabind::native

#endif  // XLABIND_FFI_NATIVE_CALL_STATUS_H_
