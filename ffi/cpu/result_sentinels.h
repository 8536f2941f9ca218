// Catches a function that writes nothing into a result it was given to write
// (in_place and jaxbind's convention make that easy to do by mistake on some
// path, and XLA's result memory is uninitialised): before the call the first
// and last few elements of a host result get a sentinel bit pattern, and a
// result whose marked elements all still hold it afterwards was not written.
//
// The sentinels are NaNs with an unusual payload for every float width of 4
// bytes or more (no arithmetic produces them), and the same bits for integers
// of that width. Elements under 4 bytes (int8, float16, bfloat16, float8...,
// where a legitimate value could match) and XLA's packed sub-byte types (whose
// views are copies) are not checked, except bool (0xA5 is no bool). Works on
// the NumPy result views: no FFI decoding.
#ifndef XLABIND_FFI_CPU_RESULT_SENTINELS_H_
#define XLABIND_FFI_CPU_RESULT_SENTINELS_H_

#include <Python.h>

namespace xlabind {

// `view` is a NumPy result view made by ViewBuffer (numpy_views.h). Returns
// whether it was marked (false for the types above, and empty results).
bool MarkUnwritten(PyObject* view);

// Whether the view's marked elements all still hold their sentinel.
bool StillUnwritten(PyObject* view);

}  // namespace xlabind

#endif  // XLABIND_FFI_CPU_RESULT_SENTINELS_H_
