#include "ffi/python_errors.h"

#include <Python.h>

namespace xlabind {
namespace {

// str(obj) as UTF-8, or a placeholder when even that fails.
std::string Str(PyObject* obj) {
  std::string text = "<unprintable>";
  if (PyObject* s = PyObject_Str(obj)) {
    if (const char* utf8 = PyUnicode_AsUTF8(s)) text = utf8;
    Py_DECREF(s);
  }
  PyErr_Clear();
  return text;
}

// "".join(traceback.format_exception(value)), or "" when formatting fails.
std::string FormatTraceback(PyObject* value) {
  std::string text;
  PyObject* module = PyImport_ImportModule("traceback");
  PyObject* lines = module ? PyObject_CallMethod(module, "format_exception", "O", value) : nullptr;
  PyObject* empty = lines ? PyUnicode_FromString("") : nullptr;
  PyObject* joined = empty ? PyUnicode_Join(empty, lines) : nullptr;
  if (joined) {
    if (const char* utf8 = PyUnicode_AsUTF8(joined)) text = utf8;
  }
  Py_XDECREF(joined);
  Py_XDECREF(empty);
  Py_XDECREF(lines);
  Py_XDECREF(module);
  PyErr_Clear();
  return text;
}

}  // namespace

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
  std::string text = std::string(Py_TYPE(value)->tp_name) + ": " + Str(value);
  std::string traceback_text = FormatTraceback(value);
  if (!traceback_text.empty()) text += "\n\n" + traceback_text;
  Py_DECREF(value);
  return text;
}

}  // namespace xlabind
