// Zero-copy NumPy views of XLA buffers, for every element type NumPy and
// ml_dtypes can represent. The only translation unit that uses NumPy's C API.
#ifndef XLABIND_FFI_CPU_NUMPY_VIEWS_H_
#define XLABIND_FFI_CPU_NUMPY_VIEWS_H_

#include <Python.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace xlabind {

// Imports NumPy's C API and installs the dtype for each element type code
// (for the views here, and for element_types.h).
// `dtypes` maps int codes to numpy.dtype objects. Returns false with a Python
// exception set on failure. Requires the GIL.
bool InstallDtypes(PyObject* dtypes);

// A new reference to a C-contiguous NumPy array over `buffer`'s memory, or
// nullptr with a Python exception set. Inputs are read-only views, outputs
// writable. The view must not outlive the handler call. Requires the GIL.
//
// XLA packs sub-byte types (int2, uint2, int4, uint4, float4_e2m1fn) several
// to a byte, while NumPy stores one per byte: those arrive as an unpacked
// copy instead of a view, and StoreResult packs results back.
PyObject* ViewBuffer(const xla::ffi::AnyBuffer& buffer, bool writable);

// Drops a view made by ViewBuffer at the end of its call. A view nothing else
// refers to (no reference, no weak reference) is kept for reuse by a later
// ViewBuffer of the same dtype and shape instead of being freed: it is then
// unreachable from Python until it is handed out again. Requires the GIL.
void ReleaseView(PyObject* view, bool is_result);

// Writes `array` (made by ViewBuffer for the result `buffer`) back into the
// buffer where it is a copy rather than a view. No Python API calls.
void StoreResult(const xla::ffi::AnyBuffer& buffer, PyObject* array);

// Cuts the escaped `views` (indices into `views`) off XLA's memory: each, and
// every NumPy array and memoryview made from it that Python can still reach
// (through containers, objects, closures or a thread's locals), is re-pointed
// at a private copy of its contents. Raw addresses taken out of Python
// (ctypes, a C library holding the pointer) cannot be found. Slow, for the
// error path only. Requires the GIL; leaves no exception set.
void DetachEscapedViews(PyObject* const* views, const std::vector<size_t>& escaped);

}  // namespace xlabind

#endif  // XLABIND_FFI_CPU_NUMPY_VIEWS_H_
