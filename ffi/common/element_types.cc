#include "ffi/common/element_types.h"

#include <array>

#include "xla/ffi/api/ffi.h"

namespace xlabind {
namespace {

// Owned references, indexed by XLA_FFI_DataType; written once at import.
std::array<PyObject*, 256> dtype_objects{};

}  // namespace

std::vector<std::pair<int, const char*>> ElementTypeNames() {
  using T = xla::ffi::DataType;
  auto code = [](T t) { return static_cast<int>(t); };
  return {
      {code(T::PRED), "bool"},
      {code(T::S2), "int2"},
      {code(T::S4), "int4"},
      {code(T::S8), "int8"},
      {code(T::S16), "int16"},
      {code(T::S32), "int32"},
      {code(T::S64), "int64"},
      {code(T::U2), "uint2"},
      {code(T::U4), "uint4"},
      {code(T::U8), "uint8"},
      {code(T::U16), "uint16"},
      {code(T::U32), "uint32"},
      {code(T::U64), "uint64"},
      {code(T::F16), "float16"},
      {code(T::F32), "float32"},
      {code(T::F64), "float64"},
      {code(T::BF16), "bfloat16"},
      {code(T::C64), "complex64"},
      {code(T::C128), "complex128"},
      {code(T::F8E5M2), "float8_e5m2"},
      {code(T::F8E4M3), "float8_e4m3"},
      {code(T::F8E4M3FN), "float8_e4m3fn"},
      {code(T::F8E4M3B11FNUZ), "float8_e4m3b11fnuz"},
      {code(T::F8E5M2FNUZ), "float8_e5m2fnuz"},
      {code(T::F8E4M3FNUZ), "float8_e4m3fnuz"},
      {code(T::F8E3M4), "float8_e3m4"},
      {code(T::F4E2M1FN), "float4_e2m1fn"},
      {code(T::F8E8M0FNU), "float8_e8m0fnu"},
  };
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
      if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "element type code %ld out of range", code);
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
