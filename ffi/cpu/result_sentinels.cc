#include "ffi/cpu/result_sentinels.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#define NPY_NO_DEPRECATED_API NPY_2_0_API_VERSION
#define NO_IMPORT_ARRAY
#define PY_ARRAY_UNIQUE_SYMBOL xlabind_numpy_api
#include <numpy/arrayobject.h>

namespace xlabind {
namespace {

// Elements marked at each end of a result.
constexpr size_t kMarkedPerEnd = 4;

// The sentinel of one element of `width` bytes: a NaN with payload 0xA5...
// for the float of that width (1 byte: 0xA5, not a bool).
void Sentinel(size_t width, uint8_t* out) {
  std::memset(out, 0xA5, width);
  switch (width) {
    case 2:
      out[1] = 0x7D;
      break;  // float16 0x7DA5
    case 4:
      out[3] = 0x7F;
      break;  // float32 0x7FA5A5A5
    case 8:
      out[7] = 0x7F;
      out[6] = 0xF5;
      break;  // float64 0x7FF5A5A5A5A5A5A5
    case 16:
      out[7] = out[15] = 0x7F;
      out[6] = out[14] = 0xF5;
      break;  // complex128
    default:
      break;
  }
}

struct Layout {
  uint8_t* data;
  size_t width;  // bytes per element
  size_t count;  // elements
  bool checked;
};

Layout LayoutOf(PyObject* view) {
  auto* array = reinterpret_cast<PyArrayObject*>(view);
  Layout layout{static_cast<uint8_t*>(PyArray_DATA(array)),
                static_cast<size_t>(PyArray_ITEMSIZE(array)),
                static_cast<size_t>(PyArray_SIZE(array)), false};
  // Packed sub-byte types arrive as copies the view owns: not XLA's memory.
  if (layout.count == 0 || PyArray_CHKFLAGS(array, NPY_ARRAY_OWNDATA)) return layout;
  const bool is_bool = PyArray_TYPE(array) == NPY_BOOL;
  layout.checked = is_bool || (layout.width >= 4 && layout.width <= 16);
  return layout;
}

// Calls visit(element pointer) for the marked elements (each once).
template <typename Visit>
bool ForMarked(const Layout& layout, Visit&& visit) {
  const size_t ends = std::min(kMarkedPerEnd, layout.count);
  for (size_t i = 0; i < ends; ++i) {
    if (!visit(layout.data + i * layout.width)) return false;
  }
  for (size_t i = std::max(ends, layout.count - ends); i < layout.count; ++i) {
    if (!visit(layout.data + i * layout.width)) return false;
  }
  return true;
}

}  // namespace

bool MarkUnwritten(PyObject* view) {
  const Layout layout = LayoutOf(view);
  if (!layout.checked) return false;
  uint8_t sentinel[16];
  Sentinel(layout.width, sentinel);
  ForMarked(layout, [&](uint8_t* element) {
    std::memcpy(element, sentinel, layout.width);
    return true;
  });
  return true;
}

bool StillUnwritten(PyObject* view) {
  const Layout layout = LayoutOf(view);
  if (!layout.checked) return false;
  uint8_t sentinel[16];
  Sentinel(layout.width, sentinel);
  return ForMarked(
      layout, [&](uint8_t* element) { return std::memcmp(element, sentinel, layout.width) == 0; });
}

}  // namespace xlabind
