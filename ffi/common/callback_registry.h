// The registry that maps the key baked into the HLO to a live Python callable.
// One registry per process, shared by every platform's handler: a key
// registered once is found by the CPU and the CUDA handler alike.
//
// The HLO carries only an integer key, never an object address: a stale or
// foreign key (an executable from another process, or one whose callback was
// freed) finds nothing and fails with a clear error instead of calling into
// freed memory. Keys start at a random offset per process and are never
// reused.
//
// Ownership: a CallbackEntry (owned by Python, through nanobind) owns the
// registration; every executable lowered with it keeps it alive (a jax
// lowering keepalive), and nothing else does for long. The Python objects a
// call needs live in a CallbackData shared by the entry and any call in
// flight, so an entry dropped by another thread mid-call leaves the running
// call intact. All registry access happens with the GIL held.
#ifndef XLABIND_FFI_COMMON_CALLBACK_REGISTRY_H_
#define XLABIND_FFI_COMMON_CALLBACK_REGISTRY_H_

#include <Python.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace xlabind {

// How the handler calls the callable with the operand views (read-only) and
// the result views (writable).
enum class CallStyle {
  // callable(operands: tuple, results: tuple): xlabind's Python adapters,
  // which call the user's function and store what it returns.
  kAdapter,
  // callable(*operands, out=<results>, **kwargs), which must return None: a
  // user's in-place function called directly, without a Python frame in
  // between. <results> is the one result view when single_result, else
  // out_builder(results tuple) when there is an out_builder (a nested result
  // tree), else the tuple of result views.
  kInPlace,
};

// What a call needs; owns one reference to each Python object. Destroy with
// the GIL held.
struct CallbackData {
  CallbackData(PyObject* callable, std::string name, CallStyle style, bool single_result,
               PyObject* kwargs, PyObject* out_builder);
  ~CallbackData();
  CallbackData(const CallbackData&) = delete;
  CallbackData& operator=(const CallbackData&) = delete;

  PyObject* callable;
  std::string name;
  CallStyle style;
  bool single_result;
  // kInPlace only, or null: turns the tuple of result views into `out`.
  PyObject* out_builder = nullptr;
  // ("out", *kwargs names) for kInPlace, as vectorcall's kwnames; else null.
  PyObject* kwnames = nullptr;
  // The kwargs values, in kwnames order after "out".
  std::vector<PyObject*> kwvalues;
};

class CallbackEntry {
 public:
  // Registers `callable` (new references are taken) under a fresh key.
  // `kwargs` (a dict, or nullptr) is passed as keyword arguments in kInPlace;
  // `out_builder` (or nullptr) builds `out` there.
  CallbackEntry(PyObject* callable, std::string name, CallStyle style, bool single_result,
                PyObject* kwargs, PyObject* out_builder);
  ~CallbackEntry();
  CallbackEntry(const CallbackEntry&) = delete;
  CallbackEntry& operator=(const CallbackEntry&) = delete;

  uint64_t key() const { return key_; }
  const std::string& name() const { return data_->name; }

 private:
  std::shared_ptr<const CallbackData> data_;
  uint64_t key_;
};

// The data registered under `key`, or null. Requires the GIL; so does
// releasing the returned pointer.
std::shared_ptr<const CallbackData> FindCallback(uint64_t key);

// How many entries are alive (for lifetime tests). Requires the GIL.
size_t LiveCallbackCount();

// The name registered under `key`, or "" (for tests and diagnostics).
// Requires the GIL.
std::string RegisteredName(uint64_t key);

}  // namespace xlabind

#endif  // XLABIND_FFI_COMMON_CALLBACK_REGISTRY_H_
