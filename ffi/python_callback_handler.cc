#include "ffi/python_callback_handler.h"

#include <Python.h>

#include <cstdint>
#include <exception>
#include <string>

#include "ffi/callback_registry.h"
#include "ffi/numpy_views.h"
#include "ffi/python_errors.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind {
namespace ffi = xla::ffi;
namespace {

// XLA calls the handler on the thread that launched the computation when its
// inputs are ready, otherwise on one of its worker threads; jax releases the
// GIL while it dispatches. So the handler takes the GIL itself, here.
class GilScope {
 public:
  GilScope() : state_(PyGILState_Ensure()) {}
  ~GilScope() { PyGILState_Release(state_); }
  GilScope(const GilScope&) = delete;
  GilScope& operator=(const GilScope&) = delete;

 private:
  PyGILState_STATE state_;
};

bool InterpreterIsFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// Owns one Python reference.
class Ref {
 public:
  explicit Ref(PyObject* obj = nullptr) : obj_(obj) {}
  ~Ref() { Py_XDECREF(obj_); }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  PyObject* get() const { return obj_; }
  explicit operator bool() const { return obj_ != nullptr; }

 private:
  PyObject* obj_;
};

ffi::Error CallbackError(const CallbackEntry& entry, const std::string& what) {
  return ffi::Error(ffi::ErrorCode::kUnknown,
                    "xlabind callback '" + entry.name() + "' failed: " + what);
}

// A view the callable kept (in a global, a closure, an attribute) would point
// into XLA's memory after this call returns: refuse that loudly.
bool AnyViewEscaped(PyObject* views) {
  // The empty tuple is a shared singleton, whatever its reference count.
  if (PyTuple_GET_SIZE(views) == 0) return false;
  if (Py_REFCNT(views) != 1) return true;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(views); ++i) {
    if (Py_REFCNT(PyTuple_GET_ITEM(views, i)) != 1) return true;
  }
  return false;
}

ffi::Error CallWithGil(uint64_t key, ffi::RemainingArgs args, ffi::RemainingRets rets) {
  const CallbackEntry* entry = FindCallback(key);
  if (entry == nullptr) {
    return ffi::Error(ffi::ErrorCode::kNotFound,
                      "xlabind: no live Python callback with key " + std::to_string(key) +
                          "; the executable outlived its callback or was compiled in "
                          "another process (disable the persistent compilation cache "
                          "for programs that use xlabind callbacks)");
  }
  // Our own reference: another thread may drop the entry while the GIL is
  // released inside the call.
  Py_INCREF(entry->callable());
  Ref callable(entry->callable());
  const std::string name = entry->name();

  Ref operands(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  Ref results(PyTuple_New(static_cast<Py_ssize_t>(rets.size())));
  if (!operands || !results) return CallbackError(*entry, TakePythonError());
  for (size_t i = 0; i < args.size(); ++i) {
    auto buffer = args.get<ffi::AnyBuffer>(i);
    if (buffer.has_error()) return buffer.error();
    PyObject* view = ViewBuffer(*buffer, /*writable=*/false);
    if (view == nullptr) return CallbackError(*entry, TakePythonError());
    PyTuple_SET_ITEM(operands.get(), i, view);
  }
  for (size_t i = 0; i < rets.size(); ++i) {
    auto buffer = rets.get<ffi::AnyBuffer>(i);
    if (buffer.has_error()) return buffer.error();
    PyObject* view = ViewBuffer(**buffer, /*writable=*/true);
    if (view == nullptr) return CallbackError(*entry, TakePythonError());
    PyTuple_SET_ITEM(results.get(), i, view);
  }

  Ref returned(PyObject_CallFunctionObjArgs(callable.get(), operands.get(), results.get(), nullptr));
  if (!returned) {
    return ffi::Error(ffi::ErrorCode::kUnknown,
                      "xlabind callback '" + name + "' raised " + TakePythonError());
  }
  for (size_t i = 0; i < rets.size(); ++i) {
    StoreResult(**rets.get<ffi::AnyBuffer>(i), PyTuple_GET_ITEM(results.get(), i));
  }
  if (AnyViewEscaped(operands.get()) || AnyViewEscaped(results.get())) {
    return ffi::Error(ffi::ErrorCode::kFailedPrecondition,
                      "xlabind callback '" + name +
                          "' kept a reference to an operand or result array after it "
                          "returned; those arrays view XLA's memory and die with the "
                          "call. Keep a copy instead (numpy.array(x)).");
  }
  return ffi::Error::Success();
}

ffi::Error CallPythonCallback(uint64_t key, ffi::RemainingArgs args, ffi::RemainingRets rets) {
  // No C++ exception may cross into XLA.
  try {
    if (!Py_IsInitialized() || InterpreterIsFinalizing()) {
      return ffi::Error(ffi::ErrorCode::kUnavailable,
                        "xlabind: the Python interpreter is shutting down");
    }
    GilScope gil;
    return CallWithGil(key, args, rets);
  } catch (const std::exception& e) {
    return ffi::Error::Internal(std::string("xlabind: C++ exception in the callback handler: ") +
                                e.what());
  } catch (...) {
    return ffi::Error::Internal("xlabind: unknown C++ exception in the callback handler");
  }
}

}  // namespace
}  // namespace xlabind

XLA_FFI_DEFINE_HANDLER_SYMBOL(XlabindPythonCallback, xlabind::CallPythonCallback,
                              xla::ffi::Ffi::Bind()
                                  .Attr<uint64_t>("callback_key")
                                  .RemainingArgs()
                                  .RemainingRets());
