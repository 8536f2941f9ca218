// Turns the pending Python exception into text for an FFI error, so that the
// JAX caller sees the exception's type, message and traceback while the
// process lives on; and hands interrupts (KeyboardInterrupt, SystemExit, any
// BaseException that is not an Exception) back to Python, so that a caller's
// `except Exception:` cannot swallow Ctrl-C.
#ifndef XLABIND_FFI_COMMON_PYTHON_ERRORS_H_
#define XLABIND_FFI_COMMON_PYTHON_ERRORS_H_

#include <string>

namespace xlabind {

// Fetches and clears the pending Python exception and returns
// "<Type>: <message>" followed by the formatted traceback; text that is not
// valid UTF-8 (lone surrogates) is backslash-escaped, never dropped.
// Dropping the exception here also frees the frames (and the buffer views)
// its traceback holds.
//
// When the exception is an interrupt, it is also scheduled to be raised again
// in the main thread as soon as Python runs there (the way CPython delivers
// SIGINT itself), and the text says so; a SystemExit also when the main
// thread's program ends first, with the computation's error uncaught (a
// wrapper of sys.excepthook, installed then, raises it). Requires the GIL and
// a pending exception.
std::string TakePythonError();

// From now on, interrupts are neither forwarded to the main thread nor raised
// there if they were forwarded already: called at interpreter exit (an atexit
// function, python/xlabind/_runtime/extension.py), when the main thread has
// ended, and an interrupt raised in an atexit function would only be printed
// as ignored.
void StopForwardingInterrupts();

// str(obj) as UTF-8 (backslash-escaped where it is not valid), or a
// placeholder when str() itself fails. Requires the GIL; leaves no exception.
std::string ToUtf8(PyObject* obj);

}  // namespace xlabind

#endif  // XLABIND_FFI_COMMON_PYTHON_ERRORS_H_
