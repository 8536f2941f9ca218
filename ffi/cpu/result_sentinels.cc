#include "ffi/cpu/result_sentinels.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "ffi/common/element_types.h"

namespace xlabind {
namespace {

namespace ffi = xla::ffi;

// Elements marked at each end of a result.
constexpr size_t kMarkedPerEnd = 4;

// The sentinel of one element of `width` bytes: a NaN with payload 0xA5...
// for the float of that width (1 byte: 0xA5, not a bool).
void Sentinel(size_t width, uint8_t* out) {
  std::memset(out, 0xA5, width);
  switch (width) {
    case 2: out[1] = 0x7D; break;  // float16 0x7DA5
    case 4: out[3] = 0x7F; break;  // float32 0x7FA5A5A5
    case 8: out[7] = 0x7F; out[6] = 0xF5; break;  // float64 0x7FF5A5A5A5A5A5A5
    case 16: out[7] = out[15] = 0x7F; out[6] = out[14] = 0xF5; break;  // complex128
    default: break;
  }
}

struct Layout {
  uint8_t* data;
  size_t width;   // bytes per element
  size_t count;   // elements
  bool checked;
};

Layout LayoutOf(const ffi::AnyBuffer& result) {
  Layout layout{static_cast<uint8_t*>(result.untyped_data()), 0, result.element_count(), false};
  const auto type = result.element_type();
  if (layout.data == nullptr || layout.count == 0 ||
      PackedBits(static_cast<int>(type)) != 0) {
    return layout;
  }
  layout.width = result.size_bytes() / layout.count;
  const bool is_bool = type == ffi::DataType::PRED;
  layout.checked = layout.width > 0 && (is_bool || result.size_bytes() >= 4);
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

void MarkUnwritten(const ffi::AnyBuffer& result) {
  const Layout layout = LayoutOf(result);
  if (!layout.checked) return;
  uint8_t sentinel[16];
  Sentinel(layout.width, sentinel);
  ForMarked(layout, [&](uint8_t* element) {
    std::memcpy(element, sentinel, layout.width);
    return true;
  });
}

bool StillUnwritten(const ffi::AnyBuffer& result) {
  const Layout layout = LayoutOf(result);
  if (!layout.checked) return false;
  uint8_t sentinel[16];
  Sentinel(layout.width, sentinel);
  return ForMarked(layout, [&](uint8_t* element) {
    return std::memcmp(element, sentinel, layout.width) == 0;
  });
}

}  // namespace xlabind
