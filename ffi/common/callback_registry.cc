#include "ffi/common/callback_registry.h"

#include <random>
#include <unordered_map>
#include <utility>

namespace xlabind {
namespace {

// Guarded by the GIL, like every Python object the entries hold.
std::unordered_map<uint64_t, std::shared_ptr<const CallbackData>>& Registry() {
  static auto* registry = new std::unordered_map<uint64_t, std::shared_ptr<const CallbackData>>();
  return *registry;
}

uint64_t NextKey() {
  // A random start makes keys from another process (e.g. an executable loaded
  // from a persistent compilation cache) miss instead of alias. Kept below
  // 2^62: MLIR builds u64 attributes from signed 64-bit integers.
  static uint64_t next = [] {
    std::random_device device;
    return ((uint64_t{device()} << 32) ^ uint64_t{device()}) >> 2;
  }();
  return next++;
}

}  // namespace

CallbackData::CallbackData(PyObject* callable, std::string name, CallStyle style,
                           bool single_result, PyObject* kwargs, PyObject* out_builder)
    : callable(callable), name(std::move(name)), style(style), single_result(single_result) {
  Py_INCREF(callable);
  if (style != CallStyle::kInPlace) return;
  if (out_builder != nullptr && out_builder != Py_None) {
    Py_INCREF(out_builder);
    this->out_builder = out_builder;
  }
  const Py_ssize_t n = kwargs ? PyDict_Size(kwargs) : 0;
  kwnames = PyTuple_New(n + 1);
  PyTuple_SET_ITEM(kwnames, 0, PyUnicode_InternFromString("out"));
  PyObject* key;
  PyObject* value;
  Py_ssize_t pos = 0;
  for (Py_ssize_t i = 1; kwargs && PyDict_Next(kwargs, &pos, &key, &value); ++i) {
    Py_INCREF(key);
    PyTuple_SET_ITEM(kwnames, i, key);
    Py_INCREF(value);
    kwvalues.push_back(value);
  }
}

CallbackData::~CallbackData() {
  for (PyObject* value : kwvalues) Py_DECREF(value);
  Py_XDECREF(kwnames);
  Py_XDECREF(out_builder);
  Py_DECREF(callable);
}

CallbackEntry::CallbackEntry(PyObject* callable, std::string name, CallStyle style,
                             bool single_result, PyObject* kwargs, PyObject* out_builder)
    : data_(std::make_shared<const CallbackData>(callable, std::move(name), style, single_result,
                                                 kwargs, out_builder)),
      key_(NextKey()) {
  Registry().emplace(key_, data_);
}

CallbackEntry::~CallbackEntry() { Registry().erase(key_); }

std::shared_ptr<const CallbackData> FindCallback(uint64_t key) {
  auto it = Registry().find(key);
  return it == Registry().end() ? nullptr : it->second;
}

size_t LiveCallbackCount() { return Registry().size(); }

std::string RegisteredName(uint64_t key) {
  auto data = FindCallback(key);
  return data ? data->name : std::string();
}

}  // namespace xlabind
