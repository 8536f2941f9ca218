#include "ffi/cpu/python_callback_handler.h"

#include <Python.h>

#include <string>
#include <vector>

#include "ffi/common/python_call.h"
#include "ffi/common/python_errors.h"
#include "ffi/cpu/numpy_views.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind {
namespace ffi = xla::ffi;
namespace {

// The CPU half of a call (python_call.h): NumPy views of host buffers.
class CpuBuffers {
 public:
  CpuBuffers(ffi::RemainingArgs args, ffi::RemainingRets rets) : args_(args), rets_(rets) {}

  static constexpr ViewList::Release kReleaseView = ReleaseView;

  size_t capacity() const { return args_.size() + rets_.size(); }
  size_t num_operands() const { return args_.size(); }

  bool AddViews(ViewList& views, std::string* error) {
    for (size_t i = 0; i < args_.size(); ++i) {
      auto buffer = args_.get<ffi::AnyBuffer>(i);
      if (buffer.has_error()) return Fail(error, "operand " + std::to_string(i) + " is not a buffer");
      if (!Add(views, ViewBuffer(*buffer, /*writable=*/false), error)) return false;
    }
    for (size_t i = 0; i < rets_.size(); ++i) {
      auto buffer = rets_.get<ffi::AnyBuffer>(i);
      if (buffer.has_error()) return Fail(error, "result " + std::to_string(i) + " is not a buffer");
      if (!Add(views, ViewBuffer(**buffer, /*writable=*/true), error)) return false;
    }
    return true;
  }

  std::string Detach(ViewList& views, const std::vector<size_t>& escaped) {
    DetachEscapedViews(views.data(), escaped);
    return "xlabind re-pointed the kept arrays at private copies, so they no longer reach "
           "it. Keep or pass a copy instead (numpy.array(x)).";
  }

  ffi::Error Finish(const CallbackData&, ViewList& views) {
    for (size_t i = 0; i < rets_.size(); ++i) {
      StoreResult(**rets_.get<ffi::AnyBuffer>(i), views[args_.size() + i]);
    }
    return ffi::Error::Success();
  }

 private:
  static bool Fail(std::string* error, const std::string& what) {
    *error = what;
    return false;
  }
  static bool Add(ViewList& views, PyObject* view, std::string* error) {
    if (view == nullptr) return Fail(error, TakePythonError());
    views.Add(view);
    return true;
  }

  ffi::RemainingArgs args_;
  ffi::RemainingRets rets_;
};

ffi::Error CallOnCpu(uint64_t key, ffi::RemainingArgs args, ffi::RemainingRets rets) {
  CpuBuffers buffers(args, rets);
  return CallPython(key, buffers);
}

}  // namespace
}  // namespace xlabind

XLA_FFI_DEFINE_HANDLER_SYMBOL(XlabindCpuPythonCallback, xlabind::CallOnCpu,
                              xla::ffi::Ffi::Bind()
                                  .Attr<uint64_t>("callback_key")
                                  .RemainingArgs()
                                  .RemainingRets());
