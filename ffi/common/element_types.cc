#include "ffi/common/element_types.h"

#include <array>

#include "xlabind/native/dtype_names.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind {
namespace {

// Owned references, indexed by XLA_FFI_DataType; written once at import.
std::array<PyObject*, 256> dtype_objects{};

}  // namespace

std::vector<std::pair<int, const char*>> ElementTypeNames() {
  using T = xla::ffi::DataType;
  // Every type NumPy or ml_dtypes has a dtype for (XLA's 1-bit integers and
  // tokens have none).
  constexpr T kTypes[] = {
      T::PRED,       T::S2,     T::S4,       T::S8,        T::S16,           T::S32,
      T::S64,        T::U2,     T::U4,       T::U8,        T::U16,           T::U32,
      T::U64,        T::F16,    T::F32,      T::F64,       T::BF16,          T::C64,
      T::C128,       T::F8E5M2, T::F8E4M3,   T::F8E4M3FN,  T::F8E4M3B11FNUZ, T::F8E5M2FNUZ,
      T::F8E4M3FNUZ, T::F8E3M4, T::F4E2M1FN, T::F8E8M0FNU,
  };
  std::vector<std::pair<int, const char*>> names;
  for (T type : kTypes) names.emplace_back(static_cast<int>(type), native::DtypeName(type));
  return names;
}

bool SetDtypeObjects(PyObject* dtypes) {
  if (!PyDict_Check(dtypes)) {
    PyErr_SetString(PyExc_TypeError, "expected a dict {int: numpy.dtype}");
    return false;
  }
  PyObject* key;
  PyObject* value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(dtypes, &pos, &key, &value)) {
    long code = PyLong_AsLong(key);
    if (code < 0 || code >= 256) {
      if (!PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "element type code %ld out of range", code);
      return false;
    }
    Py_INCREF(value);
    Py_XSETREF(dtype_objects[code], value);
  }
  return true;
}

PyObject* DtypeObject(int code) { return code >= 0 && code < 256 ? dtype_objects[code] : nullptr; }

int PackedBits(int code) {
  using T = xla::ffi::DataType;
  switch (static_cast<T>(code)) {
    case T::S2:
    case T::U2:
      return 2;
    case T::S4:
    case T::U4:
    case T::F4E2M1FN:
      return 4;
    default:
      return 0;
  }
}

}  // namespace xlabind
