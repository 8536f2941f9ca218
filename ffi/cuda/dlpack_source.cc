#include "ffi/cuda/dlpack_source.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "ffi/common/element_types.h"
#include "ffi/cuda/device_array.h"
#include "ffi/cuda/dlpack_abi.h"

namespace nb = nanobind;

namespace xlabind {
namespace {

class DlpackSource {
 public:
  explicit DlpackSource(nb::capsule capsule) {
    PyObject* object = capsule.ptr();
    if (PyCapsule_IsValid(object, "dltensor_versioned")) {
      versioned_ = static_cast<dlpack::ManagedTensorVersioned*>(
          PyCapsule_GetPointer(object, "dltensor_versioned"));
      if (versioned_->version.major != dlpack::kMajorVersion) {
        versioned_ = nullptr;
        throw nb::buffer_error("xlabind: a DLPack capsule of an unknown major version");
      }
      tensor_ = &versioned_->dl_tensor;
      readonly_ = (versioned_->flags & dlpack::kFlagReadOnly) != 0;
      PyCapsule_SetName(object, "used_dltensor_versioned");
    } else if (PyCapsule_IsValid(object, "dltensor")) {
      legacy_ = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(object, "dltensor"));
      tensor_ = &legacy_->dl_tensor;
      PyCapsule_SetName(object, "used_dltensor");
    } else {
      throw nb::type_error("xlabind: not an unused DLPack capsule");
    }
  }
  ~DlpackSource() { Release(); }
  DlpackSource(const DlpackSource&) = delete;
  DlpackSource& operator=(const DlpackSource&) = delete;

  // The producer may free the array once this returns.
  void Release() {
    if (versioned_ != nullptr && versioned_->deleter != nullptr) versioned_->deleter(versioned_);
    if (legacy_ != nullptr && legacy_->deleter != nullptr) legacy_->deleter(legacy_);
    versioned_ = nullptr;
    legacy_ = nullptr;
    tensor_ = nullptr;
  }

  const dlpack::Tensor& tensor() const {
    if (tensor_ == nullptr) throw nb::buffer_error("xlabind: this DLPack source was released");
    return *tensor_;
  }

  uintptr_t ptr() const {
    return reinterpret_cast<uintptr_t>(tensor().data) + tensor().byte_offset;
  }

  std::vector<int64_t> shape() const {
    return std::vector<int64_t>(tensor().shape, tensor().shape + tensor().ndim);
  }

  // Strides in elements, or None for a compact row-major array.
  std::optional<std::vector<int64_t>> strides() const {
    if (tensor().strides == nullptr) return std::nullopt;
    return std::vector<int64_t>(tensor().strides, tensor().strides + tensor().ndim);
  }

  // The NumPy (or ml_dtypes) dtype, or None for one xlabind does not know.
  nb::object dtype() const {
    const dlpack::DataType& type = tensor().dtype;
    if (type.lanes != 1) return nb::none();
    const int element_type = ElementTypeOfDlpack(type.code, type.bits);
    PyObject* dtype = element_type < 0 ? nullptr : DtypeObject(element_type);
    return dtype != nullptr ? nb::borrow(dtype) : nb::none();
  }

  std::pair<int32_t, int32_t> device() const {
    return {tensor().device.device_type, tensor().device.device_id};
  }

  bool readonly() const { return readonly_; }

 private:
  dlpack::ManagedTensorVersioned* versioned_ = nullptr;
  dlpack::ManagedTensor* legacy_ = nullptr;
  dlpack::Tensor* tensor_ = nullptr;
  bool readonly_ = false;
};

}  // namespace

void DefineDlpackSource(nb::module_ module) {
  nb::class_<DlpackSource>(module, "DlpackSource",
                           "A consumed DLPack capsule: what a returned device array holds.")
      .def(nb::init<nb::capsule>(), nb::arg("capsule"))
      .def_prop_ro("ptr", &DlpackSource::ptr, "The device address of the first element.")
      .def_prop_ro("shape", &DlpackSource::shape)
      .def_prop_ro("strides", &DlpackSource::strides, "In elements; None: C-contiguous.")
      .def_prop_ro("dtype", &DlpackSource::dtype)
      .def_prop_ro("device", &DlpackSource::device, "(DLPack device type, device id)")
      .def_prop_ro("readonly", &DlpackSource::readonly)
      .def("release", &DlpackSource::Release,
           "Hands the array back to its producer, which may then free it.");
}

}  // namespace xlabind
