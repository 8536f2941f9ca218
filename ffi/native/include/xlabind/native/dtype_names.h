// The NumPy / ml_dtypes name of each XLA element type ("bfloat16", not XLA's
// code 16), for error messages that a Python user can act on.
//
//   return InvalidArgument("my_op: x has dtype ", DtypeName(x.element_type()),
//                          ", expected float32");
#ifndef XLABIND_FFI_NATIVE_DTYPE_NAMES_H_
#define XLABIND_FFI_NATIVE_DTYPE_NAMES_H_

#include <string>

#include "xla/ffi/api/ffi.h"

namespace xlabind::native {

// The name of an element type as jax.numpy spells it.
//
// Args:
//   type: the element type.
// Returns:
//   The name ("float32", "bfloat16"), or nullptr for a type these headers do
//   not know (a newer XLA's); DtypeDescription names those too.
// Example:
//   const char* name = DtypeName(x.element_type());
inline const char* DtypeName(xla::ffi::DataType type) {
  using T = xla::ffi::DataType;
  switch (type) {
    case T::PRED:
      return "bool";
    case T::S1:
      return "int1";
    case T::S2:
      return "int2";
    case T::S4:
      return "int4";
    case T::S8:
      return "int8";
    case T::S16:
      return "int16";
    case T::S32:
      return "int32";
    case T::S64:
      return "int64";
    case T::U1:
      return "uint1";
    case T::U2:
      return "uint2";
    case T::U4:
      return "uint4";
    case T::U8:
      return "uint8";
    case T::U16:
      return "uint16";
    case T::U32:
      return "uint32";
    case T::U64:
      return "uint64";
    case T::F16:
      return "float16";
    case T::F32:
      return "float32";
    case T::F64:
      return "float64";
    case T::BF16:
      return "bfloat16";
    case T::C64:
      return "complex64";
    case T::C128:
      return "complex128";
    case T::TOKEN:
      return "token";
    case T::F8E5M2:
      return "float8_e5m2";
    case T::F8E4M3:
      return "float8_e4m3";
    case T::F8E4M3FN:
      return "float8_e4m3fn";
    case T::F8E4M3B11FNUZ:
      return "float8_e4m3b11fnuz";
    case T::F8E5M2FNUZ:
      return "float8_e5m2fnuz";
    case T::F8E4M3FNUZ:
      return "float8_e4m3fnuz";
    case T::F8E3M4:
      return "float8_e3m4";
    case T::F4E2M1FN:
      return "float4_e2m1fn";
    case T::F8E8M0FNU:
      return "float8_e8m0fnu";
    default:
      return nullptr;
  }
}

// An element type as an error message names it.
//
// Args:
//   type: the element type.
// Returns:
//   DtypeName, or "XLA element type <code>" for a type it does not name.
// Example:
//   return InvalidArgument("my_op: x has dtype ", DtypeDescription(x.element_type()));
inline std::string DtypeDescription(xla::ffi::DataType type) {
  const char* name = DtypeName(type);
  return name != nullptr ? std::string(name)
                         : "XLA element type " + std::to_string(static_cast<int>(type));
}

}  // namespace xlabind::native

#endif  // XLABIND_FFI_NATIVE_DTYPE_NAMES_H_
