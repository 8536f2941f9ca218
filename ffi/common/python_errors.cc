#include <Python.h>

#include "ffi/common/python_errors.h"

namespace xlabind {
namespace {

// `text` (a str) as UTF-8; lone surrogates become \udXXX instead of failing.
std::string Utf8OfStr(PyObject* text) {
  std::string out;
  if (PyObject* bytes = PyUnicode_AsEncodedString(text, "utf-8", "backslashreplace")) {
    out.assign(PyBytes_AS_STRING(bytes), static_cast<size_t>(PyBytes_GET_SIZE(bytes)));
    Py_DECREF(bytes);
  }
  PyErr_Clear();
  return out;
}

// "".join(traceback.format_exception(value)), or "" when formatting fails.
std::string FormatTraceback(PyObject* value) {
  std::string text;
  PyObject* module = PyImport_ImportModule("traceback");
  PyObject* lines = module ? PyObject_CallMethod(module, "format_exception", "O", value) : nullptr;
  PyObject* empty = lines ? PyUnicode_FromString("") : nullptr;
  PyObject* joined = empty ? PyUnicode_Join(empty, lines) : nullptr;
  if (joined) text = Utf8OfStr(joined);
  Py_XDECREF(joined);
  Py_XDECREF(empty);
  Py_XDECREF(lines);
  Py_XDECREF(module);
  PyErr_Clear();
  return text;
}

// The interrupt forwarded to the main thread and not raised yet (owned), or
// null. One waits at a time: a computation that fails in several callbacks
// (a sequential vmap) re-raises once. Guarded by the GIL, as is all below.
PyObject* forwarded = nullptr;

// Set at interpreter exit (StopForwardingInterrupts).
bool interrupts_stopped = false;

// A pending call: runs in the main thread at its next bytecode boundary and
// raises the forwarded interrupt, unless something else took it meanwhile.
int RaiseInMainThread(void*) {
  PyObject* value = forwarded;
  if (value == nullptr) return 0;
  forwarded = nullptr;
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(value)), value);
  Py_DECREF(value);
  return -1;
}

// sys.excepthook once an interrupt has been forwarded (`previous` is the hook
// it replaced). A program whose main thread waits for the failed computation
// may end with the computation's error uncaught before Python ran anywhere
// the pending call could raise the interrupt (printing the error can swallow
// it). A SystemExit is raised here instead, so that Python exits with its
// code as the program asked: CPython honours a SystemExit raised by
// sys.excepthook. A C function, so that no bytecode of its own raises the
// pending call first.
PyObject* ExceptHook(PyObject* previous, PyObject* const* args, Py_ssize_t nargs) {
  if (forwarded != nullptr && PyErr_GivenExceptionMatches(forwarded, PyExc_SystemExit)) {
    RaiseInMainThread(nullptr);
    return nullptr;
  }
  return PyObject_Vectorcall(previous, args, static_cast<size_t>(nargs), nullptr);
}

PyMethodDef except_hook_def = {
    "xlabind_excepthook", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(ExceptHook)),
    METH_FASTCALL,
    "sys.excepthook while xlabind forwards an interrupt from a callback: raises a "
    "forwarded SystemExit, else calls the hook it replaced."};

// Puts ExceptHook in front of sys.excepthook, once.
void InstallExceptHook() {
  static bool installed = false;
  if (installed) return;
  PyObject* previous = PySys_GetObject("excepthook");  // borrowed
  if (previous == nullptr) return;
  PyObject* hook = PyCFunction_New(&except_hook_def, previous);
  if (hook != nullptr && PySys_SetObject("excepthook", hook) == 0) installed = true;
  Py_XDECREF(hook);
  PyErr_Clear();
}

// Whether `value` is a BaseException the user meant to stop the program with.
bool IsInterrupt(PyObject* value) {
  return !PyObject_TypeCheck(value, reinterpret_cast<PyTypeObject*>(PyExc_Exception));
}

// Schedules `value` (borrowed) to be raised again in the main thread.
bool ForwardInterrupt(PyObject* value) {
  if (interrupts_stopped) return false;
  if (forwarded != nullptr) return true;  // one is on its way already
  if (Py_AddPendingCall(RaiseInMainThread, nullptr) == 0) {
    Py_INCREF(value);
    forwarded = value;
    InstallExceptHook();
    return true;
  }
  // The queue is full: fall back on the SIGINT machinery for Ctrl-C.
  if (PyErr_GivenExceptionMatches(value, PyExc_KeyboardInterrupt)) {
    PyErr_SetInterrupt();
    return true;
  }
  return false;
}

// Clears the traceback of `value` and of the exceptions chained to it.
void DropTracebacks(PyObject* value) {
  for (int depth = 0; value != nullptr && depth < 64; ++depth) {
    PyException_SetTraceback(value, Py_None);
    PyObject* next = PyException_GetContext(value);  // new reference or null
    if (next == nullptr) next = PyException_GetCause(value);
    Py_XDECREF(next);  // still referenced by `value`
    value = next;
  }
}

}  // namespace

void StopForwardingInterrupts() {
  interrupts_stopped = true;
  Py_CLEAR(forwarded);
}

std::string ToUtf8(PyObject* obj) {
  std::string text = "<unprintable>";
  if (PyObject* s = PyObject_Str(obj)) {
    text = Utf8OfStr(s);
    Py_DECREF(s);
  }
  PyErr_Clear();
  return text;
}

std::string TakePythonError() {
#if PY_VERSION_HEX >= 0x030C0000
  PyObject* value = PyErr_GetRaisedException();
#else
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  if (value != nullptr && traceback != nullptr) PyException_SetTraceback(value, traceback);
  Py_XDECREF(type);
  Py_XDECREF(traceback);
#endif
  if (value == nullptr) return "unknown Python error";
  std::string text = std::string(Py_TYPE(value)->tp_name) + ": " + ToUtf8(value);
  const std::string traceback_text = FormatTraceback(value);
  if (IsInterrupt(value)) {
    // The frames of the callback (and the views they hold) must die with the
    // call: the interrupt travels on without its traceback, which the text
    // below carries instead.
    DropTracebacks(value);
    if (ForwardInterrupt(value)) {
      text += "\n(xlabind raises this " + std::string(Py_TYPE(value)->tp_name) +
              " again in the main thread once the computation has failed, so that "
              "`except Exception:` does not swallow it)";
    }
  }
  if (!traceback_text.empty()) text += "\n\n" + traceback_text;
  Py_DECREF(value);
  return text;
}

}  // namespace xlabind
