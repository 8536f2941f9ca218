// Catches a callback that writes nothing into a result (jaxbind's convention
// makes that easy to do by mistake, and XLA's result memory is uninitialised):
// before the call the first and last few elements of a host result get a
// sentinel bit pattern, and a result whose marked elements all still hold it
// afterwards was not written.
//
// The sentinels are NaNs with an unusual payload for every float width (no
// arithmetic produces them), and the same bits for integers of that width;
// results smaller than 4 bytes (where a legitimate value could match) and
// XLA's packed sub-byte types (whose views are copies) are not checked, except
// bool (0xA5 is no bool). Works on the NumPy result views: no FFI decoding.
#ifndef XLABIND_FFI_CPU_RESULT_SENTINELS_H_
#define XLABIND_FFI_CPU_RESULT_SENTINELS_H_

#include <Python.h>

namespace xlabind {

// `view` is a NumPy result view made by ViewBuffer (numpy_views.h).
void MarkUnwritten(PyObject* view);

// Whether the view's marked elements all still hold their sentinel.
bool StillUnwritten(PyObject* view);

}  // namespace xlabind

#endif  // XLABIND_FFI_CPU_RESULT_SENTINELS_H_
