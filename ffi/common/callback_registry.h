// The registry that maps the key baked into the HLO to a live Python callable.
// One registry per process, shared by every platform's handler: a key
// registered once is found by the CPU and the CUDA handler alike.
//
// The HLO carries only an integer key, never an object address: a stale or
// foreign key (an executable from another process) finds nothing and fails
// with a clear error instead of calling into freed memory. Keys start at a
// random offset per process and are never reused.
//
// Ownership. What a call needs (the callable, its kwargs) is a CallbackData,
// shared by whoever can still call it:
//   - the CallbackEntry (a Python object) that registered it under its key,
//     held by the bound function that made it and by the programs lowered
//     with it until they are compiled;
//   - every compiled executable that calls it: XLA runs the handler's
//     instantiate stage when it builds the executable's custom-call thunk,
//     and that stage takes a reference (callback_state.h) that lives as long
//     as the thunk, so every execution in flight included.
// The key only needs to resolve while programs are compiled; executions never
// look it up.
//
// Threads. XLA compiles (and so instantiates) without the GIL, and destroys
// executables on whatever thread drops them last, so the registry has its own
// mutex, and a CallbackData released without the GIL is destroyed later, with
// it (its Python references may only be dropped then).
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
  // callable(out: list, args: tuple, kwargs_dump), which must return None and
  // leave the list's entries in place: jaxbind's convention, for
  // xlabind.jaxbind's drop-in, with no adapter frame in between. Each result
  // must be written (the platform checks what it can: CheckWritten below).
  kJaxbind,
};

// What a call needs; owns one reference to each Python object. Created with
// the GIL held; CallbackRef destroys it with the GIL held, whichever thread
// drops the last reference.
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
  // kJaxbind only: the third argument of every call.
  PyObject* kwargs_dump = nullptr;
  // ("out", *kwargs names) for kInPlace, as vectorcall's kwnames; else null.
  PyObject* kwnames = nullptr;
  // The kwargs values, in kwnames order after "out".
  std::vector<PyObject*> kwvalues;
};

// Shared ownership of a CallbackData that may be dropped on any thread, with
// or without the GIL (see "Threads" above). At interpreter shutdown the data
// is leaked rather than touched.
using CallbackRef = std::shared_ptr<const CallbackData>;

class CallbackEntry {
 public:
  // Registers `callable` (new references are taken) under a key: with
  // `preferred_key` 0 a fresh one; else `preferred_key` if it is free, or the
  // first free one after it. xlabind derives a preferred key from what the
  // function is and how it is called, so that every process lowering the
  // same program names it alike, and jax's persistent compilation cache
  // (keyed by the program's text, keys included) can serve one process's
  // executable to another: the executable then calls what the loading
  // process registered under that key, which is what it compiled.
  // `kwargs` (a dict, or nullptr) is passed as keyword arguments in kInPlace;
  // `out_builder` (or nullptr) builds `out` there; in kJaxbind, `out_builder`
  // is the kwargs_dump. Requires the GIL.
  CallbackEntry(PyObject* callable, std::string name, CallStyle style, bool single_result,
                PyObject* kwargs, PyObject* out_builder, uint64_t preferred_key = 0);
  // Unregisters the key; executables built from it keep their reference.
  ~CallbackEntry();
  CallbackEntry(const CallbackEntry&) = delete;
  CallbackEntry& operator=(const CallbackEntry&) = delete;

  uint64_t key() const { return key_; }
  const std::string& name() const { return data_->name; }

 private:
  CallbackRef data_;
  uint64_t key_;
};

// Whether the interpreter is shutting down (or gone): no Python may run, and
// no Python object may be touched.
bool InterpreterIsGone();

// The data registered under `key`, or null. Thread-safe; needs no GIL.
CallbackRef FindCallback(uint64_t key);

// How many keys are registered (for lifetime tests). Thread-safe.
size_t LiveCallbackCount();

// How many CallbackData objects exist, registered or held by executables
// only (for lifetime tests). Thread-safe.
size_t LiveCallbackDataCount();

// Destroys the CallbackData released without the GIL so far. Requires the
// GIL; also runs by itself (a pending call) soon after such a release.
void CollectReleasedCallbacks();

// The name registered under `key`, or "" (for tests and diagnostics).
std::string RegisteredName(uint64_t key);

}  // namespace xlabind

#endif  // XLABIND_FFI_COMMON_CALLBACK_REGISTRY_H_
