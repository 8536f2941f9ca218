#include "ffi/common/callback_registry.h"

#include <atomic>
#include <mutex>
#include <random>
#include <unordered_map>
#include <utility>

namespace xlabind {
namespace {

std::atomic<size_t> live_data{0};

// CallbackData dropped on a thread without the GIL, waiting to be destroyed
// with it. Never touched at interpreter shutdown (then they are leaked).
struct Released {
  std::mutex mutex;
  std::vector<const CallbackData*> pending;
  bool drain_scheduled = false;
};

Released& ReleasedData() {
  static auto* released = new Released();
  return *released;
}

int DrainReleased(void*) {
  CollectReleasedCallbacks();
  return 0;
}

// The deleter of every CallbackRef.
void Release(const CallbackData* data) {
  if (InterpreterIsGone()) return;  // Python objects may be gone already
  if (PyGILState_Check()) {
    delete data;
    return;
  }
  // Taking the GIL here could deadlock: the thread that holds it may wait for
  // a lock this one holds (XLA destroys executables under its own locks).
  Released& released = ReleasedData();
  bool schedule;
  {
    std::lock_guard<std::mutex> lock(released.mutex);
    released.pending.push_back(data);
    schedule = !released.drain_scheduled;
    released.drain_scheduled = true;
  }
  // The main thread destroys them at its next bytecode boundary; if the queue
  // of pending calls is full, the next registry change does.
  if (schedule && Py_AddPendingCall(DrainReleased, nullptr) != 0) {
    std::lock_guard<std::mutex> lock(released.mutex);
    released.drain_scheduled = false;
  }
}

// Keys stay below 2^62: MLIR builds u64 attributes from signed 64-bit
// integers. 0 is never a key.
constexpr uint64_t kKeyMask = (uint64_t{1} << 62) - 1;

struct Registry {
  std::mutex mutex;
  std::unordered_map<uint64_t, CallbackRef> entries;
  // Fresh keys (no preferred one) start at random, so that they rarely meet
  // the preferred keys of another process's programs.
  uint64_t next_key = [] {
    std::random_device device;
    return ((uint64_t{device()} << 32) ^ uint64_t{device()}) & kKeyMask;
  }();

  // The first free key at or after `key`. Requires the mutex.
  uint64_t FreeKeyFrom(uint64_t key) const {
    key &= kKeyMask;
    while (key == 0 || entries.count(key) != 0) key = (key + 1) & kKeyMask;
    return key;
  }
};

Registry& TheRegistry() {
  static auto* registry = new Registry();
  return *registry;
}

}  // namespace

bool InterpreterIsGone() {
#if PY_VERSION_HEX >= 0x030D0000
  return !Py_IsInitialized() || Py_IsFinalizing();
#else
  return !Py_IsInitialized() || _Py_IsFinalizing();
#endif
}

CallbackData::CallbackData(PyObject* callable, std::string name, CallStyle style,
                           bool single_result, PyObject* kwargs, PyObject* out_builder)
    : callable(callable), name(std::move(name)), style(style), single_result(single_result) {
  live_data.fetch_add(1);
  Py_INCREF(callable);
  if (style == CallStyle::kJaxbind) {
    kwargs_dump = out_builder != nullptr ? out_builder : Py_None;
    Py_INCREF(kwargs_dump);
    return;
  }
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
  Py_XDECREF(kwargs_dump);
  Py_XDECREF(kwnames);
  Py_XDECREF(out_builder);
  Py_DECREF(callable);
  live_data.fetch_sub(1);
}

CallbackEntry::CallbackEntry(PyObject* callable, std::string name, CallStyle style,
                             bool single_result, PyObject* kwargs, PyObject* out_builder,
                             uint64_t preferred_key)
    : data_(new CallbackData(callable, std::move(name), style, single_result, kwargs, out_builder),
            Release) {
  CollectReleasedCallbacks();
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  if (preferred_key != 0) {
    key_ = registry.FreeKeyFrom(preferred_key);
  } else {
    key_ = registry.FreeKeyFrom(registry.next_key);
    registry.next_key = (key_ + 1) & kKeyMask;
  }
  registry.entries.emplace(key_, data_);
}

CallbackEntry::~CallbackEntry() {
  CallbackRef unregistered;
  {
    Registry& registry = TheRegistry();
    std::lock_guard<std::mutex> lock(registry.mutex);
    auto it = registry.entries.find(key_);
    if (it != registry.entries.end()) {
      unregistered = std::move(it->second);
      registry.entries.erase(it);
    }
  }
  // Both references are dropped here, outside the lock: destroying the data
  // runs Python code (finalizers) that may register or drop entries itself.
}

CallbackRef FindCallback(uint64_t key) {
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  auto it = registry.entries.find(key);
  return it == registry.entries.end() ? nullptr : it->second;
}

size_t LiveCallbackCount() {
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  return registry.entries.size();
}

size_t LiveCallbackDataCount() { return live_data.load(); }

void CollectReleasedCallbacks() {
  Released& released = ReleasedData();
  std::vector<const CallbackData*> pending;
  {
    std::lock_guard<std::mutex> lock(released.mutex);
    pending.swap(released.pending);
    released.drain_scheduled = false;
  }
  for (const CallbackData* data : pending) delete data;
}

std::string RegisteredName(uint64_t key) {
  CallbackRef data = FindCallback(key);
  return data ? data->name : std::string();
}

}  // namespace xlabind
