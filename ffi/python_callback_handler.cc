#include "ffi/python_callback_handler.h"

#include <Python.h>

#include <array>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

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
  void reset(PyObject* obj = nullptr) {
    Py_XDECREF(obj_);
    obj_ = obj;
  }
  explicit operator bool() const { return obj_ != nullptr; }

 private:
  PyObject* obj_;
};

ffi::Error CallbackError(const std::string& name, const std::string& what) {
  return ffi::Error(ffi::ErrorCode::kUnknown, "xlabind callback '" + name + "' " + what);
}

// A fixed-size array of PyObject pointers, on the stack for the usual few
// (no heap allocation on the hot path).
class PointerArray {
 public:
  explicit PointerArray(size_t size) : size_(size) {
    if (size > inline_.size()) heap_.reset(new PyObject*[size]);
  }
  PyObject** data() { return heap_ ? heap_.get() : inline_.data(); }
  PyObject* const* data() const { return heap_ ? heap_.get() : inline_.data(); }
  size_t size() const { return size_; }

 private:
  std::array<PyObject*, 8> inline_;
  std::unique_ptr<PyObject*[]> heap_;
  size_t size_;
};

// Owns one reference to each array view handed to the callable: operands
// first, then results.
class Views {
 public:
  explicit Views(size_t size) : views_(size) {}
  Views(const Views&) = delete;
  Views& operator=(const Views&) = delete;
  ~Views() {
    for (size_t i = 0; i < count_; ++i) Py_DECREF(views_.data()[i]);
  }
  void Add(PyObject* view) { views_.data()[count_++] = view; }
  PyObject* const* data() const { return views_.data(); }
  size_t size() const { return count_; }
  // A view the callable kept (in a global, a closure, an attribute) would
  // point into XLA's memory after this call returns.
  bool AnyEscaped() const {
    for (size_t i = 0; i < count_; ++i) {
      if (Py_REFCNT(views_.data()[i]) != 1) return true;
    }
    return false;
  }

 private:
  PointerArray views_;
  size_t count_ = 0;
};

// A tuple of `count` views starting at `first` (new references), or nullptr.
PyObject* TupleOf(const Views& views, size_t first, size_t count) {
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(count));
  if (tuple == nullptr) return nullptr;
  for (size_t i = 0; i < count; ++i) {
    Py_INCREF(views.data()[first + i]);
    PyTuple_SET_ITEM(tuple, i, views.data()[first + i]);
  }
  return tuple;
}

// Releases `container` (a tuple we made); false if the callable kept it. The
// empty tuple is a shared singleton, whatever its reference count.
bool ReleaseContainer(Ref& container) {
  PyObject* obj = container.get();
  if (obj == nullptr) return true;
  const bool kept = Py_REFCNT(obj) != 1 && PyTuple_GET_SIZE(obj) != 0;
  container.reset();
  return !kept;
}

// Calls the callable in its style. A new reference to what it returned, or
// nullptr with a Python exception set.
PyObject* Invoke(const CallbackData& data, const Views& views, size_t num_operands,
                 Ref& operands_tuple, Ref& out_container) {
  const size_t num_results = views.size() - num_operands;
  if (data.style == CallStyle::kAdapter) {
    operands_tuple.reset(TupleOf(views, 0, num_operands));
    out_container.reset(TupleOf(views, num_operands, num_results));
    if (!operands_tuple || !out_container) return nullptr;
    PyObject* call_args[] = {operands_tuple.get(), out_container.get()};
    return PyObject_Vectorcall(data.callable, call_args, 2, nullptr);
  }
  // kInPlace: callable(*operands, out=..., **kwargs), with no Python frame of
  // ours in between: the path the benchmark's no-op floor measures.
  PyObject* out;
  if (data.single_result && num_results == 1) {
    out = views.data()[num_operands];
  } else {
    out_container.reset(TupleOf(views, num_operands, num_results));
    if (!out_container) return nullptr;
    out = out_container.get();
  }
  PointerArray call_args(num_operands + 1 + data.kwvalues.size());
  PyObject** slot = call_args.data();
  for (size_t i = 0; i < num_operands; ++i) *slot++ = views.data()[i];
  *slot++ = out;
  for (PyObject* value : data.kwvalues) *slot++ = value;
  return PyObject_Vectorcall(data.callable, call_args.data(), num_operands, data.kwnames);
}

ffi::Error CallWithGil(uint64_t key, ffi::RemainingArgs args, ffi::RemainingRets rets) {
  // Shared ownership: the call keeps what it needs even if another thread
  // drops the entry while the GIL is released inside the call.
  std::shared_ptr<const CallbackData> data = FindCallback(key);
  if (data == nullptr) {
    return ffi::Error(ffi::ErrorCode::kNotFound,
                      "xlabind: no live Python callback with key " + std::to_string(key) +
                          "; the executable outlived its callback or was compiled in "
                          "another process (disable the persistent compilation cache "
                          "for programs that use xlabind callbacks)");
  }
  Views views(args.size() + rets.size());
  for (size_t i = 0; i < args.size(); ++i) {
    auto buffer = args.get<ffi::AnyBuffer>(i);
    if (buffer.has_error()) return buffer.error();
    PyObject* view = ViewBuffer(*buffer, /*writable=*/false);
    if (view == nullptr) return CallbackError(data->name, "failed: " + TakePythonError());
    views.Add(view);
  }
  for (size_t i = 0; i < rets.size(); ++i) {
    auto buffer = rets.get<ffi::AnyBuffer>(i);
    if (buffer.has_error()) return buffer.error();
    PyObject* view = ViewBuffer(**buffer, /*writable=*/true);
    if (view == nullptr) return CallbackError(data->name, "failed: " + TakePythonError());
    views.Add(view);
  }

  Ref operands_tuple, out_container;
  Ref returned(Invoke(*data, views, args.size(), operands_tuple, out_container));
  if (!returned) return CallbackError(data->name, "raised " + TakePythonError());
  if (data->style == CallStyle::kInPlace && returned.get() != Py_None) {
    return CallbackError(data->name, "raised TypeError: " + data->name +
                                         " is an in_place callback: it must write into `out` "
                                         "and return None, but it returned " +
                                         Py_TYPE(returned.get())->tp_name);
  }
  returned.reset();
  for (size_t i = 0; i < rets.size(); ++i) {
    StoreResult(**rets.get<ffi::AnyBuffer>(i), views.data()[args.size() + i]);
  }
  const bool operands_released = ReleaseContainer(operands_tuple);
  const bool results_released = ReleaseContainer(out_container);
  if (!operands_released || !results_released || views.AnyEscaped()) {
    return ffi::Error(ffi::ErrorCode::kFailedPrecondition,
                      "xlabind callback '" + data->name +
                          "' kept a reference to an operand or result array after it "
                          "returned (it stored one, or handed one to code that holds on "
                          "to it: jax itself may alias NumPy memory without copying). "
                          "Those arrays view XLA's memory and die with the call; keep or "
                          "pass a copy instead (numpy.array(x)).");
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
