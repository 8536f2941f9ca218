#include "ffi/cuda/device_array.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "ffi/common/element_types.h"
#include "ffi/cuda/cuda_driver.h"
#include "ffi/cuda/dlpack_abi.h"
#include "xlabind/native/dtype_names.h"
#include "xla/ffi/api/ffi.h"

namespace nb = nanobind;

namespace xlabind {
namespace {

struct TypeInfo {
  const char* typestr;  // __cuda_array_interface__
  uint8_t code;         // DLPack
  uint8_t bits;
};

// By XLA element type. Sub-byte types have no entry: XLA packs them, and
// neither protocol describes packed elements.
std::optional<TypeInfo> InfoOf(int element_type) {
  using T = xla::ffi::DataType;
  switch (static_cast<T>(element_type)) {
    case T::PRED:
      return TypeInfo{"|b1", dlpack::kBool, 8};
    case T::S8:
      return TypeInfo{"|i1", dlpack::kInt, 8};
    case T::S16:
      return TypeInfo{"<i2", dlpack::kInt, 16};
    case T::S32:
      return TypeInfo{"<i4", dlpack::kInt, 32};
    case T::S64:
      return TypeInfo{"<i8", dlpack::kInt, 64};
    case T::U8:
      return TypeInfo{"|u1", dlpack::kUInt, 8};
    case T::U16:
      return TypeInfo{"<u2", dlpack::kUInt, 16};
    case T::U32:
      return TypeInfo{"<u4", dlpack::kUInt, 32};
    case T::U64:
      return TypeInfo{"<u8", dlpack::kUInt, 64};
    case T::F16:
      return TypeInfo{"<f2", dlpack::kFloat, 16};
    case T::F32:
      return TypeInfo{"<f4", dlpack::kFloat, 32};
    case T::F64:
      return TypeInfo{"<f8", dlpack::kFloat, 64};
    case T::BF16:
      return TypeInfo{"<V2", dlpack::kBfloat, 16};
    case T::C64:
      return TypeInfo{"<c8", dlpack::kComplex, 64};
    case T::C128:
      return TypeInfo{"<c16", dlpack::kComplex, 128};
    case T::F8E3M4:
      return TypeInfo{"|V1", dlpack::kFloat8_e3m4, 8};
    case T::F8E4M3:
      return TypeInfo{"|V1", dlpack::kFloat8_e4m3, 8};
    case T::F8E4M3B11FNUZ:
      return TypeInfo{"|V1", dlpack::kFloat8_e4m3b11fnuz, 8};
    case T::F8E4M3FN:
      return TypeInfo{"|V1", dlpack::kFloat8_e4m3fn, 8};
    case T::F8E4M3FNUZ:
      return TypeInfo{"|V1", dlpack::kFloat8_e4m3fnuz, 8};
    case T::F8E5M2:
      return TypeInfo{"|V1", dlpack::kFloat8_e5m2, 8};
    case T::F8E5M2FNUZ:
      return TypeInfo{"|V1", dlpack::kFloat8_e5m2fnuz, 8};
    case T::F8E8M0FNU:
      return TypeInfo{"|V1", dlpack::kFloat8_e8m0fnu, 8};
    default:
      return std::nullopt;
  }
}

TypeInfo InfoOrThrow(int element_type) {
  auto info = InfoOf(element_type);
  if (!info) {
    const std::string type =
        native::DtypeDescription(static_cast<xla::ffi::DataType>(element_type));
    throw nb::type_error(
        ("xlabind: " + type + " has no device-array form (sub-byte types are packed by XLA)")
            .c_str());
  }
  return *info;
}

nb::object ShapeTuple(const DeviceArray& a) {
  if (!a.shape_tuple.is_valid()) {
    PyObject* dims = PyTuple_New(static_cast<Py_ssize_t>(a.shape.size()));
    if (dims == nullptr) throw nb::python_error();
    for (size_t i = 0; i < a.shape.size(); ++i) {
      PyTuple_SET_ITEM(dims, i, PyLong_FromLongLong(a.shape[i]));
    }
    const_cast<DeviceArray&>(a).shape_tuple = nb::steal(dims);
  }
  return a.shape_tuple;
}

// Says whether the libraries that may consume a device array now (CuPy,
// PyTorch) have XLA's stream as their current stream (set by
// python/xlabind/_runtime/python_on_cuda.py). None until then.
nb::object& CurrentStreamProbe() {
  static auto* probe = new nb::object();
  return *probe;
}

bool ConsumersUseStream(const DeviceArray& a) {
  nb::object& probe = CurrentStreamProbe();
  if (!probe.is_valid() || probe.is_none()) return false;
  try {
    return nb::cast<bool>(probe(a.stream, a.device));
  } catch (const std::exception&) {
    PyErr_Clear();
    return false;  // unknown: export the stream, the consumer then orders itself
  }
}

nb::dict CudaArrayInterface(const DeviceArray& a) {
  a.CheckAlive();
  if (!a.interface.is_valid()) {
    nb::dict fixed;
    fixed["shape"] = ShapeTuple(a);
    fixed["typestr"] = InfoOrThrow(a.element_type).typestr;
    // CAI v3: a null pointer is only allowed for empty arrays.
    fixed["data"] = nb::make_tuple(a.size() == 0 ? uintptr_t{0} : a.data, a.readonly);
    fixed["version"] = 3;
    fixed["strides"] = nb::none();  // C-contiguous
    const_cast<DeviceArray&>(a).interface = fixed;
  }
  // A copy per read: a consumer may change the dict it was given.
  nb::dict interface = nb::steal<nb::dict>(PyDict_Copy(a.interface.ptr()));
  // CAI v3: "stream" asks the consumer to order its use after that stream;
  // CuPy, Numba (and PyTorch, for streams other than its own) do so by
  // synchronizing the host on it. While XLA's stream is the consumers'
  // current stream the data is ordered already: no stream, no host sync.
  // Otherwise XLA's stream (never 0, which the protocol forbids).
  if (a.stream != 0 && !ConsumersUseStream(a)) {
    interface["stream"] = a.stream;
  } else {
    interface["stream"] = nb::none();
  }
  return interface;
}

// What a DLPack capsule owns: the tensor struct, its shape, and a reference to
// the DeviceArray (so a consumer still holding it counts as a kept view).
template <typename Managed>
struct Exported {
  Managed managed;
  std::vector<int64_t> shape;
  PyObject* owner;
};

std::vector<int64_t> ShapeVector(const DeviceArray& a) {
  return std::vector<int64_t>(a.shape.begin(), a.shape.end());
}

template <typename Managed>
void DeleteExported(Managed* managed) {
  auto* exported = static_cast<Exported<Managed>*>(managed->manager_ctx);
  // Consumers may call the deleter from any thread, with or without the GIL.
  if (Py_IsInitialized()) {
    PyGILState_STATE state = PyGILState_Ensure();
    Py_DECREF(exported->owner);
    PyGILState_Release(state);
  }
  delete exported;
}

template <typename Managed>
void FillTensor(Exported<Managed>& e, const DeviceArray& a, TypeInfo info) {
  dlpack::Tensor& t = e.managed.dl_tensor;
  t.data = reinterpret_cast<void*>(a.data);
  t.device = {dlpack::kCUDA, a.device};
  t.ndim = static_cast<int32_t>(e.shape.size());
  t.dtype = {info.code, info.bits, 1};
  t.shape = e.shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
}

template <typename Managed>
void CapsuleDestructor(PyObject* capsule, const char* name) {
  // Called when the capsule dies; a consumer that took the tensor renamed it.
  if (!PyCapsule_IsValid(capsule, name)) return;
  auto* managed = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
}

nb::object Dlpack(nb::handle self, const DeviceArray& a, std::optional<nb::object> stream,
                  std::optional<std::tuple<int, int>> max_version,
                  std::optional<std::tuple<int, int>> dl_device, std::optional<bool> copy) {
  a.CheckAlive();
  const TypeInfo info = InfoOrThrow(a.element_type);
  if (copy.value_or(false)) {
    throw nb::buffer_error(
        "xlabind device arrays are views of XLA's memory; __dlpack__ "
        "cannot copy (copy=True): copy on the consumer's side");
  }
  if (dl_device && *dl_device != std::make_tuple(dlpack::kCUDA, a.device)) {
    throw nb::buffer_error(
        "xlabind device arrays live on their CUDA device; __dlpack__ "
        "cannot move them (dl_device)");
  }
  // The consumer will use the data on its stream: order it after XLA's work,
  // on the device (no host sync). DLPack's CUDA values: None or 1 the legacy
  // default stream, 2 the per-thread one, -1 "do not order", 0 forbidden
  // (ambiguous), anything else a stream handle.
  int64_t consumer = cuda::kLegacyStream;
  if (stream && !stream->is_none()) consumer = nb::cast<int64_t>(*stream);
  if (consumer == 0) {
    throw nb::buffer_error(
        "xlabind: __dlpack__(stream=0) is not allowed for CUDA (DLPack "
        "forbids it as ambiguous): pass None or 1 (the legacy default "
        "stream), 2 (the per-thread default stream) or a stream handle");
  }
  if (consumer != -1 && a.stream != 0) {
    std::string error = cuda::StreamWaitsFor(static_cast<uintptr_t>(consumer), a.stream);
    if (!error.empty()) throw nb::buffer_error(error.c_str());
  }
  Py_INCREF(self.ptr());
  if (max_version && std::get<0>(*max_version) >= 1) {
    auto* e = new Exported<dlpack::ManagedTensorVersioned>{{}, ShapeVector(a), self.ptr()};
    e->managed.version = {dlpack::kMajorVersion, dlpack::kMinorVersion};
    e->managed.manager_ctx = e;
    e->managed.deleter = DeleteExported<dlpack::ManagedTensorVersioned>;
    e->managed.flags = a.readonly ? dlpack::kFlagReadOnly : 0;
    FillTensor(*e, a, info);
    return nb::steal(PyCapsule_New(&e->managed, "dltensor_versioned", [](PyObject* capsule) {
      CapsuleDestructor<dlpack::ManagedTensorVersioned>(capsule, "dltensor_versioned");
    }));
  }
  auto* e = new Exported<dlpack::ManagedTensor>{{}, ShapeVector(a), self.ptr()};
  e->managed.manager_ctx = e;
  e->managed.deleter = DeleteExported<dlpack::ManagedTensor>;
  FillTensor(*e, a, info);
  return nb::steal(PyCapsule_New(&e->managed, "dltensor", [](PyObject* capsule) {
    CapsuleDestructor<dlpack::ManagedTensor>(capsule, "dltensor");
  }));
}

// The views of finished calls that nothing refers to, for the next calls.
// Touched only with the GIL held.
constexpr size_t kPoolCapacity = 64;
std::vector<PyObject*>& Pool() {
  static auto* pool = new std::vector<PyObject*>();
  return *pool;
}

}  // namespace

void Dims::assign(const int64_t* dims, size_t rank) {
  rank_ = rank;
  if (rank <= inline_.size()) {
    heap_.clear();
    std::copy(dims, dims + rank, inline_.begin());
  } else {
    heap_.assign(dims, dims + rank);
  }
}

size_t DeviceArray::size() const {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

size_t DeviceArray::nbytes() const {
  auto info = InfoOf(element_type);
  return info ? size() * info->bits / 8 : 0;
}

void DeviceArray::CheckAlive() const {
  if (released) {
    throw nb::buffer_error(
        "xlabind: this device array was kept past the call it was handed to, and XLA has "
        "reused its memory since; it no longer refers to any data. Copy what you need "
        "during the call (e.g. cupy.array(x), torch.clone).");
  }
}

void DefineDeviceArray(nb::module_ module) {
  module.def(
      "cuda_set_stream_probe", [](nb::object probe) { CurrentStreamProbe() = std::move(probe); },
      nb::arg("probe"),
      "probe(stream, device) -> whether CuPy's and PyTorch's current stream is `stream`; "
      "decides whether __cuda_array_interface__ exports the stream.");
  nb::class_<DeviceArray>(module, "DeviceArray",
                          "One of XLA's CUDA buffers, handed to a callback without copying. "
                          "Use it through __cuda_array_interface__ or DLPack (cupy.asarray, "
                          "torch.as_tensor / torch.from_dlpack, numba.cuda.as_cuda_array). "
                          "It is valid only during the call.\n\n"
                          "Example (the lines marked GPU run where there is one, in "
                          "tools/device_check.py):\n"
                          "  >>> import cupy  # doctest: +GPU\n"
                          "  >>> import jax, jax.numpy as jnp, xlabind\n"
                          "  >>> def double(x, *, out):  # x and out are DeviceArrays\n"
                          "  ...     cupy.multiply(cupy.asarray(x), 2, out=cupy.asarray(out))\n"
                          "  >>> op = xlabind.callback(double, lambda x: x, in_place=True,\n"
                          "  ...                       platforms=(\"cuda\",))\n"
                          "  >>> op(jnp.ones(2, device=jax.devices(\"gpu\")[0]))  "
                          "# doctest: +GPU\n"
                          "  Array([2., 2.], dtype=float32)")
      .def_prop_ro("__cuda_array_interface__", &CudaArrayInterface,
                   "The CUDA array interface (version 3): what CuPy and Numba read. It "
                   "names XLA's stream only where that is not the current stream.")
      .def(
          "__dlpack__",
          [](nb::handle self, std::optional<nb::object> stream,
             std::optional<std::tuple<int, int>> max_version,
             std::optional<std::tuple<int, int>> dl_device, std::optional<bool> copy) {
            return Dlpack(self, nb::cast<const DeviceArray&>(self), stream, max_version, dl_device,
                          copy);
          },
          nb::kw_only(), nb::arg("stream") = nb::none(), nb::arg("max_version") = nb::none(),
          nb::arg("dl_device") = nb::none(), nb::arg("copy") = nb::none(),
          "DLPack export (what torch.from_dlpack and jax.dlpack call). A consumer's "
          "stream is ordered after XLA's work with an event; stream=0 is refused.")
      .def(
          "__dlpack_device__",
          [](const DeviceArray& a) {
            a.CheckAlive();
            return std::make_pair(dlpack::kCUDA, a.device);
          },
          "(kDLCUDA, the device ordinal), as DLPack asks.")
      .def_prop_ro("shape", &ShapeTuple, "The dimensions, a tuple of ints.")
      .def_prop_ro(
          "ndim", [](const DeviceArray& a) { return a.shape.size(); }, "The number of dimensions.")
      .def_prop_ro("size", &DeviceArray::size, "The number of elements.")
      .def_prop_ro("nbytes", &DeviceArray::nbytes, "The size in bytes.")
      .def_prop_ro(
          "dtype",
          [](const DeviceArray& a) -> nb::object {
            PyObject* dtype = DtypeObject(a.element_type);
            return dtype ? nb::borrow(dtype) : nb::none();
          },
          "The NumPy dtype (ml_dtypes' for bfloat16 and the float8 types; None for "
          "a type NumPy has no name for).")
      .def_prop_ro(
          "ptr",
          [](const DeviceArray& a) {
            a.CheckAlive();
            return a.data;
          },
          "The device address of the first element.")
      .def_prop_ro(
          "readonly", [](const DeviceArray& a) { return a.readonly; },
          "True for operands, False for results (which the callback writes).")
      .def_prop_ro(
          "stream", [](const DeviceArray& a) { return a.stream; },
          "XLA's CUDA stream for this call (a CUstream as an integer).")
      .def_prop_ro(
          "device", [](const DeviceArray& a) { return a.device; }, "The CUDA device ordinal.")
      .def("__len__",
           [](const DeviceArray& a) -> size_t {
             if (a.shape.empty()) throw nb::type_error("len() of a 0-d device array");
             return static_cast<size_t>(a.shape[0]);
           })
      .def("__repr__",
           [](const DeviceArray& a) {
             std::string text = "xlabind.DeviceArray(shape=(";
             for (size_t i = 0; i < a.shape.size(); ++i) {
               text += (i ? ", " : "") + std::to_string(a.shape[i]);
             }
             if (a.shape.size() == 1) text += ",";
             PyObject* dtype = DtypeObject(a.element_type);
             text += "), dtype=" + (dtype ? std::string(nb::str(nb::handle(dtype)).c_str()) : "?");
             text += ", device=cuda:" + std::to_string(a.device);
             text += a.readonly ? ", read-only" : "";
             text += a.released ? ", released)" : ")";
             return text;
           })
      // For tests: a DeviceArray over any address (never dereferenced here).
      .def_static(
          "_for_testing",
          [](uintptr_t data, std::vector<int64_t> shape, int element_type, bool readonly,
             uintptr_t stream, int32_t device) {
            DeviceArray a;
            a.data = data;
            a.shape.assign(shape.data(), shape.size());
            a.element_type = element_type;
            a.readonly = readonly;
            a.stream = stream;
            a.device = device;
            return a;
          },
          nb::arg("data"), nb::arg("shape"), nb::arg("element_type"), nb::arg("readonly"),
          nb::arg("stream"), nb::arg("device"))
      .def("_release", [](DeviceArray& a) {
        a.released = true;
        a.data = 0;
        a.interface.reset();
      });
}

PyObject* NewDeviceArray(uintptr_t data, const int64_t* dims, size_t rank, int element_type,
                         bool readonly, uintptr_t stream, int32_t device) {
  auto fill = [&](DeviceArray& a) {
    a.data = data;
    a.shape.assign(dims, rank);
    a.element_type = element_type;
    a.readonly = readonly;
    a.stream = stream;
    a.device = device;
  };
  try {
    auto& pool = Pool();
    if (!pool.empty()) {
      PyObject* object = pool.back();
      pool.pop_back();
      fill(*nb::inst_ptr<DeviceArray>(nb::handle(object)));
      return object;
    }
    DeviceArray a;
    fill(a);
    return nb::cast(std::move(a), nb::rv_policy::move).release().ptr();
  } catch (nb::python_error& e) {
    e.restore();
    return nullptr;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

void RecycleDeviceArray(PyObject* object, bool /*is_result*/) {
  DeviceArray* a = nb::inst_ptr<DeviceArray>(nb::handle(object));
  auto& pool = Pool();
  // Only ours refers to it: unreachable from Python, so safe to hand out again.
  if (Py_REFCNT(object) == 1 && !a->released && pool.size() < kPoolCapacity) {
    a->data = 0;
    a->interface.reset();
    a->shape_tuple.reset();
    pool.push_back(object);  // keeps our reference
    return;
  }
  Py_DECREF(object);
}

int ElementTypeOfDlpack(uint8_t code, uint8_t bits) {
  for (const auto& [element_type, name] : ElementTypeNames()) {
    auto info = InfoOf(element_type);
    if (info && info->code == code && info->bits == bits) return element_type;
  }
  return -1;
}

void ReleaseDeviceArray(PyObject* object) {
  DeviceArray* a = nb::inst_ptr<DeviceArray>(nb::handle(object));
  a->released = true;
  a->data = 0;
  a->interface.reset();
}

}  // namespace xlabind
