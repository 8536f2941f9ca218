// The Python object a CUDA callback receives for each of XLA's device buffers:
// no copy, just the pointer, the shape, the dtype, the device and XLA's
// stream, offered through __cuda_array_interface__ (version 3) and DLPack, so
// that CuPy, PyTorch, Numba and jax.dlpack take it without copying. Operands
// are read-only, results writable.
//
// A DeviceArray lives no longer than its call: one kept past it is released
// (its pointer forgotten, every further use an error).
#ifndef XLABIND_FFI_CUDA_DEVICE_ARRAY_H_
#define XLABIND_FFI_CUDA_DEVICE_ARRAY_H_

#include <Python.h>
#include <nanobind/nanobind.h>

#include <cstdint>
#include <vector>

namespace xlabind {

struct DeviceArray {
  uintptr_t data = 0;
  std::vector<int64_t> shape;
  int element_type = 0;  // XLA_FFI_DataType
  bool readonly = false;
  uintptr_t stream = 0;  // XLA's stream (CUstream) for this call
  int32_t device = 0;    // CUDA device ordinal
  bool released = false;

  size_t size() const;
  size_t nbytes() const;
  // Raises a Python BufferError when the array was kept past its call.
  void CheckAlive() const;
};

// Registers the Python class on `module` (once, at import).
void DefineDeviceArray(nanobind::module_ module);

// A new Python DeviceArray (a new reference), or null with an exception set.
// Requires the GIL.
PyObject* NewDeviceArray(DeviceArray array);

// Forgets the pointer of the DeviceArray `object` (borrowed). Requires the GIL.
void ReleaseDeviceArray(PyObject* object);

// The XLA element type DLPack's (code, bits) describes, or -1.
int ElementTypeOfDlpack(uint8_t code, uint8_t bits);

}  // namespace xlabind

#endif  // XLABIND_FFI_CUDA_DEVICE_ARRAY_H_
