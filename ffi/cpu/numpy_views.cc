#include "ffi/cpu/numpy_views.h"

#include "ffi/common/element_types.h"
#include "xlabind/native/dtype_names.h"

#define NPY_NO_DEPRECATED_API NPY_2_0_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL xlabind_numpy_api
#include <numpy/arrayobject.h>

#include <array>
#include <cstdint>
#include <unordered_set>

namespace xlabind {
namespace ffi = xla::ffi;
namespace {

// Owned references, indexed by XLA_FFI_DataType; written once at import.
std::array<PyArray_Descr*, 256> dtype_by_code{};

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

// Views from earlier calls that nothing else refers to. Creating and freeing
// two NumPy arrays is about a third of a no-op call's cost; reusing them is
// not, and is safe: a pooled view is unreachable from Python (no reference,
// no weak reference, not tracked by the collector) until it is handed out
// again, re-pointed at the new buffer. Guarded by the GIL.
std::vector<PyArrayObject*>& Pool() {
  static auto* pool = new std::vector<PyArrayObject*>();
  return *pool;
}
constexpr size_t kPoolCapacity = 32;

int ViewFlags(bool writable) {
  return NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | (writable ? NPY_ARRAY_WRITEABLE : 0);
}

// A pooled view of exactly this dtype, shape and writability, still as
// ViewBuffer made it (callbacks may set .shape, .strides, .dtype or flags of
// a view in place), re-pointed at `data`; or null.
PyObject* TakeFromPool(PyArray_Descr* descr, int ndim, const npy_intp* shape, void* data,
                       bool writable) {
  auto& pool = Pool();
  for (size_t k = pool.size(); k-- > 0;) {
    PyArrayObject* view = pool[k];
    if (PyArray_DESCR(view) != descr || PyArray_NDIM(view) != ndim) continue;
    if ((PyArray_FLAGS(view) & ViewFlags(true)) != ViewFlags(writable)) continue;
    const npy_intp* dims = PyArray_DIMS(view);
    const npy_intp* strides = PyArray_STRIDES(view);
    bool same = true;
    npy_intp stride = PyDataType_ELSIZE(descr);
    for (int d = ndim; d-- > 0 && same;) {
      same = dims[d] == shape[d] && (shape[d] <= 1 || strides[d] == stride);
      stride *= shape[d];
    }
    if (!same || reinterpret_cast<uintptr_t>(data) % PyDataType_ALIGNMENT(descr) != 0) continue;
    pool[k] = pool.back();
    pool.pop_back();
    reinterpret_cast<PyArrayObject_fields*>(view)->data = static_cast<char*>(data);
    return reinterpret_cast<PyObject*>(view);
  }
  return nullptr;
}

}  // namespace

void ReleaseView(PyObject* view, bool /*is_result*/) {
  auto* fields = reinterpret_cast<PyArrayObject_fields*>(view);
  auto& pool = Pool();
  if (Py_REFCNT(view) == 1 && fields->weakreflist == nullptr && fields->base == nullptr &&
      !(fields->flags & NPY_ARRAY_OWNDATA) && pool.size() < kPoolCapacity) {
    pool.push_back(reinterpret_cast<PyArrayObject*>(view));  // keeps our reference
    return;
  }
  Py_DECREF(view);
}

bool InstallDtypes(PyObject* dtypes) {
  if (PyArray_API == nullptr && _import_array() < 0) return false;
  if (!SetDtypeObjects(dtypes)) return false;
  for (int code = 0; code < static_cast<int>(dtype_by_code.size()); ++code) {
    PyObject* dtype = DtypeObject(code);
    if (dtype == nullptr) continue;
    PyArray_Descr* descr = nullptr;
    if (!PyArray_DescrConverter(dtype, &descr)) return false;  // new reference
    Py_XSETREF(dtype_by_code[code], descr);
  }
  return true;
}

PyObject* ViewBuffer(const ffi::AnyBuffer& buffer, bool writable) {
  const int code = static_cast<int>(buffer.element_type());
  PyArray_Descr* descr = dtype_by_code[code & 0xff];
  if (descr == nullptr) {
    PyErr_Format(PyExc_TypeError, "xlabind: %s has no NumPy dtype here (is ml_dtypes too old?)",
                 native::DtypeDescription(buffer.element_type()).c_str());
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
  const int bits = PackedBits(static_cast<int>(buffer.element_type()));
  if (bits == 0) {
    if (PyObject* view =
            TakeFromPool(descr, static_cast<int>(dims.size()), shape.data(), data, writable)) {
      return view;
    }
    Py_INCREF(descr);  // PyArray_NewFromDescr steals it.
    return PyArray_NewFromDescr(&PyArray_Type, descr, static_cast<int>(dims.size()), shape.data(),
                                /*strides=*/nullptr, data, ViewFlags(writable),
                                /*obj=*/nullptr);
  }
  Py_INCREF(descr);
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
  const int bits = PackedBits(static_cast<int>(buffer.element_type()));
  if (bits == 0 || buffer.untyped_data() == nullptr) return;
  auto* array = reinterpret_cast<PyArrayObject*>(view);
  Pack(static_cast<const uint8_t*>(PyArray_DATA(array)),
       static_cast<uint8_t*>(buffer.untyped_data()), static_cast<size_t>(PyArray_SIZE(array)),
       bits);
}

}  // namespace xlabind

// ---------------------------------------------------------------------------
// Detaching escaped views (error path).

namespace xlabind {
namespace {

// One escaped buffer: XLA's bytes [begin, end) and the private copy that
// replaces them.
struct Moved {
  char* begin;
  char* end;
  PyArrayObject* copy;  // owned
};

class Detacher {
 public:
  explicit Detacher(std::vector<Moved> moved) : moved_(std::move(moved)) {}
  ~Detacher() {
    for (Moved& m : moved_) Py_DECREF(m.copy);
  }

  // Re-points `obj` if it is an array or memoryview into a moved buffer; then
  // looks inside it when it is a container the collector does not track
  // (those are reachable only through what we traverse).
  void Visit(PyObject* obj) {
    if (PyArray_Check(obj)) {
      Repoint(reinterpret_cast<PyArrayObject*>(obj));
    } else if (PyMemoryView_Check(obj)) {
      Repoint(reinterpret_cast<PyMemoryViewObject*>(obj));
    } else if (PyObject_IS_GC(obj) && !PyObject_GC_IsTracked(obj) && seen_.insert(obj).second) {
      pending_.push_back(obj);
    }
  }

  void Traverse(PyObject* obj) {
    Visit(obj);
    TraverseChildren(obj);
    while (!pending_.empty()) {
      PyObject* next = pending_.back();
      pending_.pop_back();
      TraverseChildren(next);
    }
  }

  // A frame that is running keeps its locals out of the collector's view;
  // f_locals shows them.
  void TraverseLocals(PyObject* frame) {
    PyObject* locals = PyObject_GetAttrString(frame, "f_locals");
    if (locals == nullptr) return PyErr_Clear();
    if (PyObject* values = PyMapping_Values(locals)) {
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(values); ++i) {
        Traverse(PyList_GET_ITEM(values, i));
      }
      Py_DECREF(values);
    }
    PyErr_Clear();
    Py_DECREF(locals);
  }

  void Repoint(PyArrayObject* array) {
    auto* fields = reinterpret_cast<PyArrayObject_fields*>(array);
    const Moved* m = Find(fields->data);
    if (m == nullptr) return;
    fields->data = PyArray_BYTES(m->copy) + (fields->data - m->begin);
    Py_INCREF(m->copy);
    Py_XSETREF(fields->base, reinterpret_cast<PyObject*>(m->copy));
  }

  void Repoint(PyMemoryViewObject* view) {
    if (const Moved* m = Find(static_cast<char*>(view->view.buf))) {
      view->view.buf = PyArray_BYTES(m->copy) + (static_cast<char*>(view->view.buf) - m->begin);
    }
    Py_buffer& master = view->mbuf->master;
    if (const Moved* m = Find(static_cast<char*>(master.buf))) {
      master.buf = PyArray_BYTES(m->copy) + (static_cast<char*>(master.buf) - m->begin);
    }
  }

 private:
  const Moved* Find(char* address) const {
    for (const Moved& m : moved_) {
      if (address >= m.begin && address < m.end) return &m;
    }
    return nullptr;
  }

  void TraverseChildren(PyObject* obj) {
    traverseproc traverse = Py_TYPE(obj)->tp_traverse;
    if (traverse == nullptr) return;
    traverse(
        obj,
        [](PyObject* child, void* self) {
          if (child != nullptr) static_cast<Detacher*>(self)->Visit(child);
          return 0;
        },
        this);
  }

  std::vector<Moved> moved_;
  std::unordered_set<PyObject*> seen_;
  std::vector<PyObject*> pending_;
};

// gc.get_objects() plus every thread's running frames: where anything Python
// can still reach is found.
void TraverseEverything(Detacher& detacher) {
  if (PyObject* gc = PyImport_ImportModule("gc")) {
    if (PyObject* objects = PyObject_CallMethod(gc, "get_objects", nullptr)) {
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(objects); ++i) {
        detacher.Traverse(PyList_GET_ITEM(objects, i));
      }
      Py_DECREF(objects);
    }
    Py_DECREF(gc);
  }
  PyErr_Clear();
  PyObject* sys = PyImport_ImportModule("sys");
  PyObject* frames = sys ? PyObject_CallMethod(sys, "_current_frames", nullptr) : nullptr;
  Py_XDECREF(sys);
  if (frames == nullptr || !PyDict_Check(frames)) {  // {thread id: innermost frame}
    Py_XDECREF(frames);
    return PyErr_Clear();
  }
  PyObject* key;
  PyObject* frame;
  Py_ssize_t pos = 0;
  while (PyDict_Next(frames, &pos, &key, &frame)) {
    Py_INCREF(frame);
    while (frame != nullptr && frame != Py_None) {
      detacher.TraverseLocals(frame);
      PyObject* back = PyObject_GetAttrString(frame, "f_back");
      Py_DECREF(frame);
      frame = back;
    }
    Py_XDECREF(frame);
    PyErr_Clear();
  }
  Py_DECREF(frames);
}

}  // namespace

void DetachEscapedViews(PyObject* const* views, const std::vector<size_t>& escaped) {
  std::vector<Moved> moved;
  for (size_t i : escaped) {
    auto* array = reinterpret_cast<PyArrayObject*>(views[i]);
    // Sub-byte types arrive as private copies, and empty views point at a
    // static byte: neither is XLA's memory.
    if (PyArray_CHKFLAGS(array, NPY_ARRAY_OWNDATA) || PyArray_NBYTES(array) == 0) continue;
    auto* copy = reinterpret_cast<PyArrayObject*>(PyArray_NewCopy(array, NPY_CORDER));
    if (copy == nullptr) {
      PyErr_Clear();
      continue;
    }
    char* begin = PyArray_BYTES(array);
    moved.push_back({begin, begin + PyArray_NBYTES(array), copy});
  }
  if (moved.empty()) return;
  Detacher detacher(std::move(moved));
  TraverseEverything(detacher);
  for (size_t i : escaped) detacher.Visit(views[i]);  // last: the scan matches their old address
}

}  // namespace xlabind
