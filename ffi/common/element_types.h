// XLA element types as Python sees them: the NumPy / ml_dtypes name of each,
// and the numpy.dtype objects Python resolved from those names (ml_dtypes may
// lack some). Shared by the CPU views and the CUDA device arrays.
#ifndef XLABIND_FFI_COMMON_ELEMENT_TYPES_H_
#define XLABIND_FFI_COMMON_ELEMENT_TYPES_H_

#include <Python.h>

#include <utility>
#include <vector>

namespace xlabind {

// XLA element types by code, each with the NumPy / ml_dtypes name that
// represents it.
std::vector<std::pair<int, const char*>> ElementTypeNames();

// Stores {element type code: numpy.dtype} (new references are taken).
// Returns false with a Python exception set on failure. Requires the GIL.
bool SetDtypeObjects(PyObject* dtypes);

// The numpy.dtype for `code` (borrowed), or null when Python has none.
PyObject* DtypeObject(int code);

// Bits per element of the types XLA packs several to a byte; 0 for the rest.
int PackedBits(int code);

}  // namespace xlabind

#endif  // XLABIND_FFI_COMMON_ELEMENT_TYPES_H_
