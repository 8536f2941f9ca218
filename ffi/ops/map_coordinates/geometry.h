// Reads a map_coordinates call's geometry off its buffers and attributes,
// checking every shape, for the CPU handlers and the CUDA handlers alike.
//
// Buffers: grid (*grid_batch, *spatial), ndim coordinate arrays of one shape
// (*coord_batch, points), values (*batch, points). The batch dimensions (one
// per vmap level) broadcast: each grid or coordinate batch dimension is 1 or
// the values' size.
#ifndef XLABIND_FFI_OPS_MAP_COORDINATES_GEOMETRY_H_
#define XLABIND_FFI_OPS_MAP_COORDINATES_GEOMETRY_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "xlabind/native/errors.h"
#include "xlabind/native/shapes.h"
#include "ffi/ops/map_coordinates/interpolation.h"
#include "xla/ffi/api/ffi.h"

namespace xlabind::map_coordinates {

inline xla::ffi::Error MakeGeometry(const char* op, const std::vector<int64_t>& grid,
                                    const std::vector<std::vector<int64_t>>& coordinates,
                                    const std::vector<int64_t>& values, int64_t order, int64_t mode,
                                    xla::ffi::Span<const int64_t> derivative, Geometry* g) {
  using native::InvalidArgument;
  using native::ShapeString;
  if (values.empty()) return InvalidArgument(op, ": the values need a points dimension");
  const int batch_dims = static_cast<int>(values.size()) - 1;
  if (batch_dims > kMaxBatchDims) {
    return InvalidArgument(op, ": at most ", kMaxBatchDims, " batch dimensions, got ", batch_dims);
  }
  const int64_t ndim = static_cast<int64_t>(coordinates.size());
  if (ndim < 1 || ndim > kMaxDims || grid.size() != static_cast<size_t>(batch_dims + ndim)) {
    return InvalidArgument(op, ": a grid of shape ", ShapeString(grid), " does not fit ", ndim,
                           " coordinate arrays (1 to ", kMaxDims, " dimensions)");
  }
  const std::vector<int64_t>& coords = coordinates[0];
  for (const auto& other : coordinates) {
    if (other != coords || coords.size() != static_cast<size_t>(batch_dims + 1)) {
      return InvalidArgument(op,
                             ": every coordinate array needs the shape of the values' "
                             "batch and points, ",
                             ShapeString(values), "; got ", ShapeString(other));
    }
  }
  if (coords.back() != values.back()) {
    return InvalidArgument(op, ": ", coords.back(), " coordinates for ", values.back(), " values");
  }
  if (order < 0 || order > 5) {
    return InvalidArgument(op, ": order must be 0 to 5, got ", order);
  }
  if (mode < kConstant || mode > kReflect) return InvalidArgument(op, ": unknown mode ", mode);
  if (derivative.size() != static_cast<size_t>(ndim)) {
    return InvalidArgument(op, ": `derivative` needs one entry per grid dimension (", ndim,
                           "), got ", derivative.size());
  }
  *g = Geometry{};
  g->ndim = static_cast<int32_t>(ndim);
  g->batch_dims = batch_dims;
  g->order = static_cast<int32_t>(order);
  g->mode = static_cast<int32_t>(mode);
  g->points = values.back();
  g->grid_size = 1;
  for (int a = static_cast<int>(ndim) - 1; a >= 0; --a) {
    g->grid_shape[a] = grid[batch_dims + a];
    g->grid_strides[a] = g->grid_size;
    g->grid_size *= g->grid_shape[a];
    g->derivative[a] = static_cast<int32_t>(derivative[a]);
    if (g->grid_shape[a] < 1) {
      return InvalidArgument(op, ": the grid has an empty dimension (shape ", ShapeString(grid),
                             ")");
    }
  }
  int64_t grid_stride = g->grid_size, coord_stride = g->points;
  g->batch = 1;
  for (int k = batch_dims - 1; k >= 0; --k) {
    const int64_t size = values[k];
    if ((grid[k] != 1 && grid[k] != size) || (coords[k] != 1 && coords[k] != size)) {
      return InvalidArgument(op, ": batch dimension ", k, " of the grid (", ShapeString(grid),
                             ") or the coordinates (", ShapeString(coords),
                             ") does not broadcast to the values (", ShapeString(values), ")");
    }
    g->batch_shape[k] = size;
    g->grid_batch_strides[k] = grid[k] == 1 ? 0 : grid_stride;
    g->coord_batch_strides[k] = coords[k] == 1 ? 0 : coord_stride;
    grid_stride *= grid[k];
    coord_stride *= coords[k];
    g->batch *= size;
  }
  // One grid for every batch element, coordinates not broadcast: the batch
  // is one flat run of points (rows of coordinates, xlabind.ops keeps them
  // so that a split along any dimension stays split, would otherwise run
  // point loops of a row each: 6x slower at 4 points a row).
  bool one_grid = true, dense = true;
  for (int k = 0; k < batch_dims; ++k) {
    one_grid = one_grid && g->grid_batch_strides[k] == 0;
    dense = dense && coords[k] == values[k];
  }
  if (batch_dims > 0 && one_grid && dense) {
    g->points *= g->batch;
    g->batch = 1;
    g->batch_dims = 0;
  }
  return xla::ffi::Error::Success();
}

// One call's buffers and geometry, read off the FFI arguments.
struct Call {
  Geometry geometry;
  std::optional<xla::ffi::AnyBuffer> grid;    // the gather's input, the scatter's result
  std::optional<xla::ffi::AnyBuffer> values;  // the gather's result, the scatter's input
  std::vector<xla::ffi::AnyBuffer> coordinates;

  template <typename T>
  Coordinates<T> CoordinatePointers() const {
    Coordinates<T> coords{};
    for (size_t a = 0; a < coordinates.size(); ++a) coords.axis[a] = coordinates[a].typed_data<T>();
    return coords;
  }
};

// `args` [first, first + count) as coordinate arrays of `like`'s dtype.
inline xla::ffi::Error ReadCoordinates(const char* op, xla::ffi::RemainingArgs args, size_t first,
                                       size_t count, const xla::ffi::AnyBuffer& like, Call* call) {
  for (size_t a = 0; a < count; ++a) {
    auto buffer = args.get<xla::ffi::AnyBuffer>(first + a);
    if (buffer.has_error()) return buffer.error();
    XLABIND_RETURN_IF_ERROR(native::CheckSameType(op, "coordinates", *buffer, "grid", like));
    call->coordinates.push_back(*buffer);
  }
  return xla::ffi::Error::Success();
}

inline xla::ffi::Error ReadGeometry(const char* op, Call* call, int64_t order, int64_t mode,
                                    xla::ffi::Span<const int64_t> derivative) {
  XLABIND_RETURN_IF_ERROR(native::CheckSameType(op, "grid", *call->grid, "values", *call->values));
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& c : call->coordinates) shapes.push_back(native::ShapeOf(c));
  return MakeGeometry(op, native::ShapeOf(*call->grid), shapes, native::ShapeOf(*call->values),
                      order, mode, derivative, &call->geometry);
}

// The gather: (grid, coordinates...) -> values.
inline xla::ffi::Error ReadGather(const char* op, xla::ffi::RemainingArgs args,
                                  xla::ffi::AnyBuffer values, int64_t order, int64_t mode,
                                  xla::ffi::Span<const int64_t> derivative, Call* call) {
  if (args.size() < 2) return native::InvalidArgument(op, ": needs a grid and coordinates");
  auto grid = args.get<xla::ffi::AnyBuffer>(0);
  if (grid.has_error()) return grid.error();
  call->grid = *grid;
  call->values = values;
  XLABIND_RETURN_IF_ERROR(ReadCoordinates(op, args, 1, args.size() - 1, *grid, call));
  return ReadGeometry(op, call, order, mode, derivative);
}

// The scatter (the gather's transpose): (coordinates..., cotangents) -> grid.
inline xla::ffi::Error ReadScatter(const char* op, xla::ffi::RemainingArgs args,
                                   xla::ffi::AnyBuffer grid, int64_t order, int64_t mode,
                                   xla::ffi::Span<const int64_t> derivative, Call* call) {
  if (args.size() < 2) return native::InvalidArgument(op, ": needs coordinates and cotangents");
  auto cotangents = args.get<xla::ffi::AnyBuffer>(args.size() - 1);
  if (cotangents.has_error()) return cotangents.error();
  call->grid = grid;
  call->values = *cotangents;
  XLABIND_RETURN_IF_ERROR(ReadCoordinates(op, args, 0, args.size() - 1, grid, call));
  return ReadGeometry(op, call, order, mode, derivative);
}

// The signature every map_coordinates handler binds after its platform's
// context: (operands...) -> one buffer, with the attributes the Python side
// passes (python/xlabind/ops/map_coordinates/op.py) and Read* above take.
template <typename Binding>
auto BindCall(Binding binding) {
  return std::move(binding)
      .RemainingArgs()
      .template Ret<xla::ffi::AnyBuffer>()
      .template Attr<int64_t>("order")
      .template Attr<int64_t>("mode")
      .template Attr<xla::ffi::Span<const int64_t>>("derivative");
}

}  // namespace xlabind::map_coordinates

#endif  // XLABIND_FFI_OPS_MAP_COORDINATES_GEOMETRY_H_
