// The Python-call machinery every platform's callback handler shares: taking
// the GIL, owning references, calling the registered callable in its style,
// turning exceptions into FFI errors, and making sure no view of XLA's memory
// outlives the call.
//
// A handler supplies the platform's half as a `Platform` type (see
// cpu/python_callback_handler.cc, cuda/python_callback_handler.cc):
//
//   static constexpr ViewList::Release kReleaseView;  // or nullptr: drop views
//   // A new reference to the view of `buffer`, or null with a Python error set.
//   PyObject* View(const ffi::AnyBuffer& buffer, bool is_result);
//   std::string Detach(ViewList& views, const std::vector<size_t>& escaped);
//   // After a successful call; results start at views[num_operands], and at
//   // rets[first_ret] (after jax's token, in an ordered call).
//   ffi::Error Finish(ffi::RemainingRets rets, ViewList& views, size_t num_operands,
//                     size_t first_ret);
//   // The call's status (native/call_status.h) into `status`; without the GIL.
//   ffi::Error WriteStatus(ffi::AnyBuffer status, bool failed, const std::string& message);
//   // Before and after a call that writes its results itself (in_place,
//   // jaxbind): mark a result's view (false: it cannot be marked), and whether
//   // it is still as marked (nothing was written).
//   bool MarkUnwritten(PyObject* result_view);
//   bool Unwritten(PyObject* result_view);
//
// All but WriteStatus run with the GIL held. Detach must leave every escaped view (and
// whatever was made from it) unable to reach XLA's memory, and says what it
// did, for the error message.
#ifndef XLABIND_FFI_COMMON_PYTHON_CALL_H_
#define XLABIND_FFI_COMMON_PYTHON_CALL_H_

#include <Python.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "ffi/common/callback_registry.h"
#include "ffi/common/python_errors.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind {

// XLA calls a handler on the thread that launched the computation when its
// inputs are ready, otherwise on one of its worker threads; jax releases the
// GIL while it dispatches. So the handler takes the GIL itself, here. A
// thread Python did not start (XLA's workers; the CUDA handler always runs
// on one) gets a Python thread state at its first call and keeps it:
// PyGILState_Ensure alone would make and destroy one on every call (~8 µs
// each, and every threading.local made again).
class GilScope {
 public:
  GilScope();
  ~GilScope() { PyGILState_Release(state_); }
  GilScope(const GilScope&) = delete;
  GilScope& operator=(const GilScope&) = delete;

 private:
  PyGILState_STATE state_;
};

// Owns one Python reference.
class Ref {
 public:
  explicit Ref(PyObject* obj = nullptr) : obj_(obj) {}
  ~Ref() { Py_XDECREF(obj_); }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  PyObject* get() const { return obj_; }
  void reset(PyObject* obj = nullptr) {
    Py_XDECREF(obj_);
    obj_ = obj;
  }
  explicit operator bool() const { return obj_ != nullptr; }

 private:
  PyObject* obj_;
};

// A fixed-size array of PyObject pointers, on the stack for the usual few
// (no heap allocation on the hot path).
class PointerArray {
 public:
  explicit PointerArray(size_t size) {
    if (size > inline_.size()) heap_.reset(new PyObject*[size]);
  }
  PyObject** data() { return heap_ ? heap_.get() : inline_.data(); }
  PyObject* const* data() const { return heap_ ? heap_.get() : inline_.data(); }

 private:
  std::array<PyObject*, 8> inline_;
  std::unique_ptr<PyObject*[]> heap_;
};

// Owns one reference to each view handed to the callable: operands first,
// then results. At the end of the call each reference goes to `release`
// (a platform may keep views nothing else refers to, for reuse), or is dropped.
class ViewList {
 public:
  using Release = void (*)(PyObject* view, bool is_result);
  ViewList(size_t capacity, size_t num_operands, Release release = nullptr)
      : views_(capacity), num_operands_(num_operands), release_(release) {}
  ViewList(const ViewList&) = delete;
  ViewList& operator=(const ViewList&) = delete;
  ~ViewList() {
    for (size_t i = 0; i < count_; ++i) {
      if (release_ != nullptr) {
        release_(views_.data()[i], i >= num_operands_);
      } else {
        Py_DECREF(views_.data()[i]);
      }
    }
  }
  void Add(PyObject* view) { views_.data()[count_++] = view; }
  PyObject* operator[](size_t i) const { return views_.data()[i]; }
  PyObject* const* data() const { return views_.data(); }
  size_t size() const { return count_; }

  // The views something else still refers to once the call has returned and
  // the handler dropped its own containers: the callable kept them (in a
  // global, a closure, a thread, an array made from them).
  std::vector<size_t> Escaped() const {
    std::vector<size_t> escaped;
    for (size_t i = 0; i < count_; ++i) {
      if (Py_REFCNT(views_.data()[i]) != 1) escaped.push_back(i);
    }
    return escaped;
  }

 private:
  PointerArray views_;
  size_t count_ = 0;
  size_t num_operands_;
  Release release_;
};

xla::ffi::Error CallbackError(const std::string& name, const std::string& what);

// Exit. Once Python's finalization has begun, CPython 3.11 to 3.13 end any
// other thread that takes the GIL (pthread_exit, whose forced unwind runs
// through the frames above it). Above a call's Python code sit this module's
// frames, whose C++ runtime (zig's libc++abi and libunwind) misreads glibc's
// forced unwind and jumps to a wild address; above a Python thread that waits
// for a computation sit jaxlib's, which abort on it. So at interpreter exit,
// an atexit function (python/xlabind/_runtime/extension.py) that runs before
// finalization has CloseCallsAndWait stop admitting calls from other threads
// and wait for those running Python to finish; a call refused then fails
// without taking the GIL. While other Python threads live (daemon threads), a
// call on another thread that is refused, or finishes, after that does not
// return either: its computation completing would wake a thread that waits
// for it into finalization. It waits, without the GIL, for finalization to
// begin and then for ever (as CPython 3.14 makes such threads wait), and the
// process ends around it; the atexit function then keeps jax's clients alive,
// whose destruction would wait for it.

// Whether the current call may run Python (a handler asks before taking the
// GIL): always, but after CloseCallsAndWait on a thread other than the
// exiting one, unless the call is nested in one that runs there, and never
// once finalization has begun. An admitted call is counted until its
// CallAdmission ends.
class CallAdmission {
 public:
  CallAdmission();
  ~CallAdmission();
  CallAdmission(const CallAdmission&) = delete;
  CallAdmission& operator=(const CallAdmission&) = delete;
  bool admitted() const { return admitted_; }

 private:
  bool admitted_;
};

// Stops admitting calls from other threads than this one (the exiting one),
// and waits, without the GIL, up to `timeout_s` seconds for the calls running
// Python to finish. With `hold_calls`, calls on other threads that are refused
// or finish from now on wait in HoldWhileExiting. Returns how many calls are
// still running. Requires the GIL.
int CloseCallsAndWait(double timeout_s, bool hold_calls);

// Waits, without the GIL, up to `timeout_s` seconds until each of `threads`
// (threading.get_ident() values: the daemon threads at exit) that has called a
// function inline waits in HoldWhileExiting: between two calls, such a thread
// is in jaxlib, which it must not leave once finalization begins. Returns how
// many do not. Requires the GIL, after CloseCallsAndWait with `hold_calls`.
int WaitForPythonThreadsToHold(const std::vector<unsigned long>& threads, double timeout_s);

// Where a call on another thread than the exiting one waits instead of
// returning to XLA, once calls are closed with `hold_calls` (see "Exit"):
// until finalization begins, then for ever. Returns at once otherwise, or
// if finalization has not begun a while after the calls closed (an atexit
// function that waits for this very call). Without the GIL.
void HoldWhileExiting();

// Calls `data.callable` on `views` in its style and checks the outcome: a
// Python exception, an in-place callable that returned something, views that
// escaped (detached by `detach`, which receives the escaped indices). Returns
// the error text ("" on success). Requires the GIL.
std::string InvokeAndCheck(const CallbackData& data, ViewList& views, size_t num_operands,
                           std::string (*detach)(void* platform, ViewList&,
                                                 const std::vector<size_t>&),
                           void* platform);

// Where a call's arrays are in its frame. An ordered call's first argument and
// first result are jax's ordering token (lowered as io_callback lowers it):
// no array, so no view.
struct FrameLayout {
  size_t first_arg = 0;
  size_t num_args = 0;
  size_t first_ret = 0;
  size_t num_results = 0;
};

// The layout of a frame whose first `num_rets` results are the callable's
// (a status may follow them).
inline FrameLayout LayoutOf(xla::ffi::RemainingArgs args, xla::ffi::RemainingRets rets,
                            size_t num_rets) {
  namespace ffi = xla::ffi;
  FrameLayout layout;
  if (args.size() > 0) {
    auto first = args.get<ffi::AnyBuffer>(0);
    layout.first_arg = first.has_value() && first->element_type() == ffi::DataType::TOKEN;
  }
  if (num_rets > 0) {
    auto first = rets.get<ffi::AnyBuffer>(0);
    layout.first_ret = first.has_value() && (*first)->element_type() == ffi::DataType::TOKEN;
  }
  layout.num_args = args.size() - layout.first_arg;
  layout.num_results = num_rets - layout.first_ret;
  return layout;
}

// Views of every operand, then of every result, into `views`; or the error.
template <typename Platform>
std::string AddViews(Platform& platform, xla::ffi::RemainingArgs args, xla::ffi::RemainingRets rets,
                     const FrameLayout& layout, ViewList& views) {
  namespace ffi = xla::ffi;
  auto add = [&](const ffi::AnyBuffer& buffer, bool is_result) {
    PyObject* view = platform.View(buffer, is_result);
    if (view == nullptr) return false;
    views.Add(view);
    return true;
  };
  for (size_t i = 0; i < layout.num_args; ++i) {
    auto buffer = args.get<ffi::AnyBuffer>(layout.first_arg + i);
    if (buffer.has_error()) return "operand " + std::to_string(i) + " is not a buffer";
    if (!add(*buffer, false)) return TakePythonError();
  }
  for (size_t i = 0; i < layout.num_results; ++i) {
    auto buffer = rets.get<ffi::AnyBuffer>(layout.first_ret + i);
    if (buffer.has_error()) return "result " + std::to_string(i) + " is not a buffer";
    if (!add(**buffer, true)) return TakePythonError();
  }
  return "";
}

// Whether result `i` shares memory with an operand (input_output_aliases): the
// function reads the operand through it, so no sentinel may be written there.
inline bool SharesOperandMemory(xla::ffi::RemainingArgs args, xla::ffi::RemainingRets rets,
                                const FrameLayout& layout, size_t i) {
  namespace ffi = xla::ffi;
  auto result = rets.get<ffi::AnyBuffer>(layout.first_ret + i);
  if (result.has_error()) return true;
  const auto* start = static_cast<const char*>((*result)->untyped_data());
  const auto* end = start + (*result)->size_bytes();
  for (size_t k = 0; k < layout.num_args; ++k) {
    auto operand = args.get<ffi::AnyBuffer>(layout.first_arg + k);
    if (operand.has_error()) continue;
    const auto* data = static_cast<const char*>(operand->untyped_data());
    if (data < end && start < data + operand->size_bytes()) return true;
  }
  return false;
}

// Whether calls check that a function which writes its results wrote every
// one (always, but for tools/benchmarks/main.py, which measures what the check costs).
bool ChecksUnwrittenResults();
void SetChecksUnwrittenResults(bool checks);

// What a function that writes its results (in_place, jaxbind) must be told
// when result `i` of `num_results` still holds what xlabind marked it with.
std::string UnwrittenResultError(const CallbackData& data, size_t i, size_t num_results);

// CallPython's work, once the call is admitted.
template <typename Platform>
xla::ffi::Error CallPythonAdmitted(const CallbackData& data, xla::ffi::RemainingArgs args,
                                   xla::ffi::RemainingRets rets, size_t num_rets,
                                   Platform& platform) {
  namespace ffi = xla::ffi;
  try {
    const FrameLayout layout = LayoutOf(args, rets, num_rets);
    GilScope gil;
    ViewList views(layout.num_args + layout.num_results, layout.num_args, Platform::kReleaseView);
    std::string error = AddViews(platform, args, rets, layout, views);
    if (!error.empty()) return CallbackError(data.name, "failed: " + error);
    // XLA's result memory is uninitialised: a function that writes its results
    // must write every one, which the platform checks where it can (not in a
    // result that is an operand's memory, which must keep the operand's values).
    const bool check_written = data.style != CallStyle::kAdapter && ChecksUnwrittenResults();
    std::array<bool, 64> marked{};  // results past the 64th go unchecked
    for (size_t i = 0; check_written && i < layout.num_results && i < marked.size(); ++i) {
      if (SharesOperandMemory(args, rets, layout, i)) continue;
      marked[i] = platform.MarkUnwritten(views[layout.num_args + i]);
    }
    error = InvokeAndCheck(
        data, views, layout.num_args,
        [](void* p, ViewList& v, const std::vector<size_t>& escaped) {
          return static_cast<Platform*>(p)->Detach(v, escaped);
        },
        &platform);
    for (size_t i = 0; error.empty() && i < layout.num_results && i < marked.size(); ++i) {
      if (marked[i] && platform.Unwritten(views[layout.num_args + i])) {
        error = UnwrittenResultError(data, i, layout.num_results);
      }
    }
    if (!error.empty()) {
      return ffi::Error(ffi::ErrorCode::kFailedPrecondition,
                        "xlabind callback '" + data.name + "' " + error);
    }
    return platform.Finish(rets, views, layout.num_args, layout.first_ret);
  } catch (const std::exception& e) {
    return ffi::Error::Internal(std::string("xlabind: C++ exception in the callback handler: ") +
                                e.what());
  } catch (...) {
    return ffi::Error::Internal("xlabind: unknown C++ exception in the callback handler");
  }
}

// The handler body shared by every platform: takes the GIL, lets `platform`
// make the views of the operands and of the first `num_rets` results (after
// the token, if any), calls, checks, and lets `platform` finish. No C++
// exception crosses into XLA. At exit, the call may not run, and may not
// return (see "Exit" above).
template <typename Platform>
xla::ffi::Error CallPython(const CallbackData& data, xla::ffi::RemainingArgs args,
                           xla::ffi::RemainingRets rets, size_t num_rets, Platform& platform) {
  namespace ffi = xla::ffi;
  ffi::Error result = ffi::Error::Success();
  {
    CallAdmission admission;
    if (admission.admitted()) {
      result = CallPythonAdmitted(data, args, rets, num_rets, platform);
    } else {
      result = ffi::Error(ffi::ErrorCode::kUnavailable,
                          "xlabind callback '" + data.name +
                              "' did not run: the Python interpreter is shutting down");
    }
  }
  HoldWhileExiting();
  return result;
}

// The same call for a program that stops every device when one fails
// (native/call_status.h): the last result is the call's status, which
// `platform.WriteStatus(buffer, failed, message)` fills in; the error is
// returned only when even that fails.
template <typename Platform>
xla::ffi::Error CallPythonReportingStatus(const CallbackData& data, xla::ffi::RemainingArgs args,
                                          xla::ffi::RemainingRets rets, Platform& platform) {
  namespace ffi = xla::ffi;
  if (rets.size() < 1) return ffi::Error::Internal("xlabind: the call has no status result");
  auto status = rets.get<ffi::AnyBuffer>(rets.size() - 1);
  if (status.has_error()) return ffi::Error::Internal("xlabind: the status is not a buffer");
  ffi::Error error = CallPython(data, args, rets, rets.size() - 1, platform);
  return platform.WriteStatus(**status, error.failure(), error.message());
}

}  // namespace xlabind

#endif  // XLABIND_FFI_COMMON_PYTHON_CALL_H_
