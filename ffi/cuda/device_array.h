// The Python object a CUDA callback receives for each of XLA's device buffers:
// no copy, just the pointer, the shape, the dtype, the device and XLA's
// stream, offered through __cuda_array_interface__ (version 3) and DLPack, so
// that CuPy, PyTorch, Numba and jax.dlpack take it without copying. Operands
// are read-only, results writable.
//
// A DeviceArray lives no longer than its call: one kept past it is released
// (its pointer forgotten, every further use an error). One nothing refers to
// after its call is kept for a later call's buffer (RecycleDeviceArray): a
// call makes no Python object and no heap allocation for its views.
#ifndef XLABIND_FFI_CUDA_DEVICE_ARRAY_H_
#define XLABIND_FFI_CUDA_DEVICE_ARRAY_H_

#include <Python.h>
#include <nanobind/nanobind.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace xlabind {

// A shape, stored in place up to rank 8 (no heap allocation per call).
class Dims {
 public:
  Dims() = default;
  Dims(const int64_t* dims, size_t rank) { assign(dims, rank); }
  void assign(const int64_t* dims, size_t rank);
  const int64_t* begin() const { return heap_.empty() ? inline_.data() : heap_.data(); }
  const int64_t* end() const { return begin() + rank_; }
  size_t size() const { return rank_; }
  bool empty() const { return rank_ == 0; }
  int64_t operator[](size_t i) const { return begin()[i]; }

 private:
  std::array<int64_t, 8> inline_{};
  std::vector<int64_t> heap_;
  size_t rank_ = 0;
};

struct DeviceArray {
  uintptr_t data = 0;
  Dims shape;
  int element_type = 0;  // XLA_FFI_DataType
  bool readonly = false;
  uintptr_t stream = 0;  // XLA's stream (CUstream) for this call
  int32_t device = 0;    // CUDA device ordinal
  bool released = false;
  // What __cuda_array_interface__ and `shape` return, built on their first
  // read in a call (CuPy reads the interface twice per cupy.asarray).
  nanobind::object interface;
  nanobind::object shape_tuple;

  size_t size() const;
  size_t nbytes() const;
  // Raises a Python BufferError when the array was kept past its call.
  void CheckAlive() const;
};

// Registers the Python class on `module` (once, at import).
void DefineDeviceArray(nanobind::module_ module);

// A Python DeviceArray over `data` (a new reference; a recycled one where
// there is one), or null with an exception set. Requires the GIL.
PyObject* NewDeviceArray(uintptr_t data, const int64_t* dims, size_t rank, int element_type,
                         bool readonly, uintptr_t stream, int32_t device);

// Where a call's view goes when the call ends (ViewList::Release): kept for
// reuse when nothing else refers to it, else its reference dropped.
// Requires the GIL.
void RecycleDeviceArray(PyObject* object, bool is_result);

// Forgets the pointer of the DeviceArray `object` (borrowed). Requires the GIL.
void ReleaseDeviceArray(PyObject* object);

// The XLA element type DLPack's (code, bits) describes, or -1.
int ElementTypeOfDlpack(uint8_t code, uint8_t bits);

}  // namespace xlabind

#endif  // XLABIND_FFI_CUDA_DEVICE_ARRAY_H_
