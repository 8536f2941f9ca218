#include "xlabind/cpu/python_callback_handler.h"

#include <Python.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ffi/common/callback_state.h"
#include "ffi/common/python_call.h"
#include "ffi/cpu/numpy_views.h"
#include "ffi/cpu/result_sentinels.h"
#include "xlabind/native/call_status.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind {
namespace ffi = xla::ffi;
namespace {

struct Cpu {};
using CpuCallbackState = CallbackState<Cpu>;

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

  ffi::Error Finish(ffi::RemainingRets rets, ViewList& views, size_t num_operands,
                    size_t first_ret) {
    for (size_t i = num_operands; i < views.size(); ++i) {
      StoreResult(**rets.get<ffi::AnyBuffer>(first_ret + i - num_operands), views[i]);
    }
    return ffi::Error::Success();
  }

  bool MarkUnwritten(PyObject* view) { return xlabind::MarkUnwritten(view); }
  bool Unwritten(PyObject* view) { return StillUnwritten(view); }

  ffi::Error WriteStatus(ffi::AnyBuffer status, bool failed, const std::string& message) {
    native::EncodeStatus(failed, message, static_cast<uint8_t*>(status.untyped_data()));
    return ffi::Error::Success();
  }
};

// The key is an attribute of every stage (XLA decodes them all each time);
// only instantiate reads it: the state holds what it named.
ffi::Error Execute(CpuCallbackState* state, uint64_t, ffi::RemainingArgs args,
                   ffi::RemainingRets rets) {
  CpuBuffers buffers;
  return CallPython(*state->data, args, rets, rets.size(), buffers);
}

ffi::Error ExecuteReportingStatus(CpuCallbackState* state, uint64_t, ffi::RemainingArgs args,
                                  ffi::RemainingRets rets) {
  CpuBuffers buffers;
  return CallPythonReportingStatus(*state->data, args, rets, buffers);
}

}  // namespace

const XLA_FFI_TypeId* CpuCallbackStateTypeId() { return &CpuCallbackState::id; }
const XLA_FFI_TypeInfo* CpuCallbackStateTypeInfo() { return &CpuCallbackState::kTypeInfo; }

}  // namespace xlabind

XLA_FFI_DEFINE_HANDLER_SYMBOL(XlabindCpuPythonCallbackInstantiate,
                              xlabind::InstantiateCallback<xlabind::Cpu>,
                              xla::ffi::Ffi::BindInstantiate().Attr<uint64_t>("callback_key"));

namespace xlabind {
namespace {

// What both execute stages bind: the state, and the key.
auto ExecuteBinding() {
  return xla::ffi::Ffi::Bind()
      .Ctx<xla::ffi::State<CpuCallbackState>>()
      .Attr<uint64_t>("callback_key")
      .RemainingArgs()
      .RemainingRets();
}

}  // namespace
}  // namespace xlabind

XLA_FFI_DEFINE_HANDLER_SYMBOL(XlabindCpuPythonCallback, xlabind::Execute,
                              xlabind::ExecuteBinding());

XLA_FFI_DEFINE_HANDLER_SYMBOL(XlabindCpuPythonCallbackReportingStatus,
                              xlabind::ExecuteReportingStatus, xlabind::ExecuteBinding());
