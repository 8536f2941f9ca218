#include "ffi/cpu/python_callback_handler.h"

#include <Python.h>

#include <string>
#include <vector>

#include "ffi/common/python_call.h"
#include "ffi/cpu/numpy_views.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind {
namespace ffi = xla::ffi;
namespace {

// The CPU half of a call (python_call.h): NumPy views of host buffers.
struct CpuBuffers {
  static constexpr ViewList::Release kReleaseView = ReleaseView;

  PyObject* View(const ffi::AnyBuffer& buffer, bool is_result) {
    return ViewBuffer(buffer, /*writable=*/is_result);
  }

  std::string Detach(ViewList& views, const std::vector<size_t>& escaped) {
    DetachEscapedViews(views.data(), escaped);
    return "xlabind re-pointed the kept arrays at private copies, so they no longer reach "
           "it. Keep or pass a copy instead (numpy.array(x)).";
  }

  ffi::Error Finish(ffi::RemainingRets rets, ViewList& views, size_t num_operands) {
    for (size_t i = 0; i < rets.size(); ++i) {
      StoreResult(**rets.get<ffi::AnyBuffer>(i), views[num_operands + i]);
    }
    return ffi::Error::Success();
  }
};

ffi::Error CallOnCpu(uint64_t key, ffi::RemainingArgs args, ffi::RemainingRets rets) {
  CpuBuffers buffers;
  return CallPython(key, args, rets, buffers);
}

}  // namespace
}  // namespace xlabind

XLA_FFI_DEFINE_HANDLER_SYMBOL(XlabindCpuPythonCallback, xlabind::CallOnCpu,
                              xla::ffi::Ffi::Bind()
                                  .Attr<uint64_t>("callback_key")
                                  .RemainingArgs()
                                  .RemainingRets());
