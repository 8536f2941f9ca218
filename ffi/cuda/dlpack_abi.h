// DLPack's C ABI (https://dmlc.github.io/dlpack/latest/c_api.html), version
// 1.1, declared from the specification: the structs any DLPack consumer
// (CuPy, PyTorch, Numba, jax.dlpack) reads from the capsules xlabind hands
// out. Only what device_array.cc uses.
#ifndef XLABIND_FFI_CUDA_DLPACK_ABI_H_
#define XLABIND_FFI_CUDA_DLPACK_ABI_H_

#include <cstdint>

namespace xlabind::dlpack {

constexpr uint32_t kMajorVersion = 1;
constexpr uint32_t kMinorVersion = 1;

// DLDeviceType
constexpr int32_t kCPU = 1;
constexpr int32_t kCUDA = 2;

// DLDataTypeCode
enum TypeCode : uint8_t {
  kInt = 0,
  kUInt = 1,
  kFloat = 2,
  kBfloat = 4,
  kComplex = 5,
  kBool = 6,
  kFloat8_e3m4 = 7,
  kFloat8_e4m3 = 8,
  kFloat8_e4m3b11fnuz = 9,
  kFloat8_e4m3fn = 10,
  kFloat8_e4m3fnuz = 11,
  kFloat8_e5m2 = 12,
  kFloat8_e5m2fnuz = 13,
  kFloat8_e8m0fnu = 14,
};

// DLPACK_FLAG_BITMASK_READ_ONLY
constexpr uint64_t kFlagReadOnly = 1;

extern "C" {

struct Version {
  uint32_t major;
  uint32_t minor;
};

struct Device {
  int32_t device_type;
  int32_t device_id;
};

struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;  // null: compact row-major
  uint64_t byte_offset;
};

// Capsule "dltensor" (pre-1.0 consumers).
struct ManagedTensor {
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor* self);
};

// Capsule "dltensor_versioned" (consumers that ask for max_version >= (1, 0)).
struct ManagedTensorVersioned {
  Version version;
  void* manager_ctx;
  void (*deleter)(ManagedTensorVersioned* self);
  uint64_t flags;
  Tensor dl_tensor;
};

}  // extern "C"
}  // namespace xlabind::dlpack

#endif  // XLABIND_FFI_CUDA_DLPACK_ABI_H_
