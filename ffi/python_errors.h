// Turns the pending Python exception into text for an FFI error, so that the
// JAX caller sees the exception's type, message and traceback while the
// process lives on.
#ifndef XLABIND_FFI_PYTHON_ERRORS_H_
#define XLABIND_FFI_PYTHON_ERRORS_H_

#include <string>

namespace xlabind {

// Fetches and clears the pending Python exception and returns
// "<Type>: <message>" followed by the formatted traceback. Dropping the
// exception here also frees the frames (and the buffer views) its traceback
// holds. Requires the GIL and a pending exception.
std::string TakePythonError();

}  // namespace xlabind

#endif  // XLABIND_FFI_PYTHON_ERRORS_H_
