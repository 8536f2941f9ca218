// The registry that maps the key baked into the HLO to a live Python callable.
//
// The HLO carries only an integer key, never an object address: a stale or
// foreign key (an executable from another process, or one whose callback was
// freed) finds nothing and fails with a clear error instead of calling into
// freed memory. Keys start at a random 64-bit offset per process and are never
// reused.
//
// Ownership: a CallbackEntry owns one reference to its callable. Python owns
// the entries (through nanobind); xlabind keeps each one alive from the bound
// function that made it and from every executable lowered with it (a jax
// lowering keepalive). All registry access happens with the GIL held.
#ifndef XLABIND_FFI_CALLBACK_REGISTRY_H_
#define XLABIND_FFI_CALLBACK_REGISTRY_H_

#include <Python.h>

#include <cstdint>
#include <string>

namespace xlabind {

class CallbackEntry {
 public:
  // Registers `callable` (a new reference is taken) under a fresh key.
  CallbackEntry(PyObject* callable, std::string name);
  ~CallbackEntry();
  CallbackEntry(const CallbackEntry&) = delete;
  CallbackEntry& operator=(const CallbackEntry&) = delete;

  uint64_t key() const { return key_; }
  const std::string& name() const { return name_; }
  // Borrowed reference; callers that may release the GIL must hold their own.
  PyObject* callable() const { return callable_; }

 private:
  PyObject* callable_;
  std::string name_;
  uint64_t key_;
};

// The entry registered under `key`, or nullptr. Requires the GIL.
const CallbackEntry* FindCallback(uint64_t key);

// How many entries are alive (for lifetime tests). Requires the GIL.
size_t LiveCallbackCount();

}  // namespace xlabind

#endif  // XLABIND_FFI_CALLBACK_REGISTRY_H_
