#include "ffi/callback_registry.h"

#include <random>
#include <unordered_map>
#include <utility>

namespace xlabind {
namespace {

// Guarded by the GIL, like every Python object the entries hold.
std::unordered_map<uint64_t, const CallbackEntry*>& Registry() {
  static auto* registry = new std::unordered_map<uint64_t, const CallbackEntry*>();
  return *registry;
}

uint64_t NextKey() {
  // A random start makes keys from another process (e.g. an executable loaded
  // from a persistent compilation cache) miss instead of alias.
  // Kept below 2^62: MLIR builds u64 attributes from signed 64-bit integers.
  static uint64_t next = [] {
    std::random_device device;
    return ((uint64_t{device()} << 32) ^ uint64_t{device()}) >> 2;
  }();
  return next++;
}

}  // namespace

CallbackEntry::CallbackEntry(PyObject* callable, std::string name)
    : callable_(callable), name_(std::move(name)), key_(NextKey()) {
  Py_INCREF(callable_);
  Registry().emplace(key_, this);
}

CallbackEntry::~CallbackEntry() {
  Registry().erase(key_);
  Py_DECREF(callable_);
}

const CallbackEntry* FindCallback(uint64_t key) {
  auto it = Registry().find(key);
  return it == Registry().end() ? nullptr : it->second;
}

size_t LiveCallbackCount() { return Registry().size(); }

}  // namespace xlabind
