#include "ffi/numpy_views.h"

#define NPY_NO_DEPRECATED_API NPY_2_0_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL xlabind_numpy_api
#include <numpy/arrayobject.h>

#include <array>
#include <cstdint>

namespace xlabind {
namespace ffi = xla::ffi;
namespace {

// Owned references, indexed by XLA_FFI_DataType; written once at import.
std::array<PyArray_Descr*, 256> dtype_by_code{};

// Bits per element of the types XLA packs several to a byte; 0 for the rest.
int PackedBits(ffi::DataType type) {
  switch (type) {
    case ffi::DataType::S2:
    case ffi::DataType::U2:
      return 2;
    case ffi::DataType::S4:
    case ffi::DataType::U4:
    case ffi::DataType::F4E2M1FN:
      return 4;
    default:
      return 0;
  }
}

// XLA packs little-end first: element i sits at bit (i * bits) % 8 of byte
// (i * bits) / 8. ml_dtypes keeps the same bits in the low end of a byte.
void Unpack(const uint8_t* packed, uint8_t* unpacked, size_t count, int bits) {
  const uint8_t mask = static_cast<uint8_t>((1u << bits) - 1);
  for (size_t i = 0; i < count; ++i) {
    const size_t bit = i * bits;
    unpacked[i] = static_cast<uint8_t>(packed[bit / 8] >> (bit % 8)) & mask;
  }
}

void Pack(const uint8_t* unpacked, uint8_t* packed, size_t count, int bits) {
  const uint8_t mask = static_cast<uint8_t>((1u << bits) - 1);
  const size_t packed_bytes = (count * bits + 7) / 8;
  for (size_t i = 0; i < packed_bytes; ++i) packed[i] = 0;
  for (size_t i = 0; i < count; ++i) {
    const size_t bit = i * bits;
    packed[bit / 8] |= static_cast<uint8_t>((unpacked[i] & mask) << (bit % 8));
  }
}

}  // namespace

std::vector<std::pair<int, const char*>> ElementTypeNames() {
  using T = ffi::DataType;
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

bool InstallDtypes(PyObject* dtypes) {
  if (PyArray_API == nullptr && _import_array() < 0) return false;
  if (!PyDict_Check(dtypes)) {
    PyErr_SetString(PyExc_TypeError, "InstallDtypes: expected a dict {int: numpy.dtype}");
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
    PyArray_Descr* descr = nullptr;
    if (!PyArray_DescrConverter(value, &descr)) return false;  // new reference
    Py_XSETREF(dtype_by_code[code], descr);
  }
  return true;
}

PyObject* ViewBuffer(const ffi::AnyBuffer& buffer, bool writable) {
  const int code = static_cast<int>(buffer.element_type());
  PyArray_Descr* descr = dtype_by_code[code & 0xff];
  if (descr == nullptr) {
    PyErr_Format(PyExc_TypeError,
                 "xlabind: XLA element type %d has no NumPy dtype here "
                 "(is ml_dtypes too old?)",
                 code);
    return nullptr;
  }
  auto dims = buffer.dimensions();
  std::array<npy_intp, NPY_MAXDIMS> shape;
  if (dims.size() > shape.size()) {
    PyErr_Format(PyExc_ValueError, "xlabind: rank %d exceeds NumPy's limit of %d",
                 static_cast<int>(dims.size()), NPY_MAXDIMS);
    return nullptr;
  }
  for (size_t i = 0; i < dims.size(); ++i) shape[i] = dims[i];
  // XLA may hand out a null pointer for a zero-size buffer; NumPy would then
  // allocate memory of its own, so point empty views at a static byte.
  static char empty_storage[16];
  void* data = buffer.untyped_data() != nullptr ? buffer.untyped_data() : empty_storage;
  const int bits = PackedBits(buffer.element_type());
  int flags = NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | (writable ? NPY_ARRAY_WRITEABLE : 0);
  Py_INCREF(descr);  // PyArray_NewFromDescr steals it.
  if (bits == 0) {
    return PyArray_NewFromDescr(&PyArray_Type, descr, static_cast<int>(dims.size()),
                                shape.data(), /*strides=*/nullptr, data, flags, /*obj=*/nullptr);
  }
  PyObject* copy = PyArray_NewFromDescr(&PyArray_Type, descr, static_cast<int>(dims.size()),
                                        shape.data(), nullptr, nullptr, 0, nullptr);
  if (copy == nullptr) return nullptr;
  auto* array = reinterpret_cast<PyArrayObject*>(copy);
  Unpack(static_cast<const uint8_t*>(data), static_cast<uint8_t*>(PyArray_DATA(array)),
         static_cast<size_t>(PyArray_SIZE(array)), bits);
  if (!writable) PyArray_CLEARFLAGS(array, NPY_ARRAY_WRITEABLE);
  return copy;
}

void StoreResult(const ffi::AnyBuffer& buffer, PyObject* view) {
  const int bits = PackedBits(buffer.element_type());
  if (bits == 0 || buffer.untyped_data() == nullptr) return;
  auto* array = reinterpret_cast<PyArrayObject*>(view);
  Pack(static_cast<const uint8_t*>(PyArray_DATA(array)), static_cast<uint8_t*>(buffer.untyped_data()),
       static_cast<size_t>(PyArray_SIZE(array)), bits);
}

}  // namespace xlabind
