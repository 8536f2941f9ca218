// One index of the map_coordinates CUDA kernels' loops (cuda_kernels.cu):
// where value i's grid and coordinates are, then its value, or its cotangent
// added into the grid (points.h). Host-device code, so that the host harness
// of the tests (tests/native/cuda_bodies_handlers.cc) runs these very
// bodies, kernel shapes and all, against the CPU handlers without a GPU.
#ifndef XLABIND_FFI_OPS_MAP_COORDINATES_CUDA_POINT_BODIES_H_
#define XLABIND_FFI_OPS_MAP_COORDINATES_CUDA_POINT_BODIES_H_

#include <cstdint>

#include "ffi/ops/map_coordinates/interpolation.h"
#include "ffi/ops/map_coordinates/points.h"
#include "xlabind/native/host_device.h"

namespace xlabind::map_coordinates {

// Where value i's grid and coordinates are. Without batch dimensions (most
// calls) nothing to compute: no 64-bit division per point.
XLABIND_HOST_DEVICE void Locate(const Geometry& g, int64_t i, int64_t* grid_offset, int64_t* at) {
  if (g.batch_dims == 0) {
    *grid_offset = 0;
    *at = i;
    return;
  }
  const int64_t b = i / g.points, p = i % g.points;
  int64_t coord_offset;
  BatchOffsets(g, b, grid_offset, &coord_offset);
  *at = coord_offset + p;
}

// The interior fast paths need the rank at compile time (kNdim 1 to 3); the
// general path (kNdim 0) serves every rank.
template <int kNdim>
constexpr bool kKernelFast = kNdim > 0;

template <typename T, int kOrder, int kNdim>
XLABIND_HOST_DEVICE void GatherIndex(const Geometry& g, const T* grid, const Coordinates<T>& coords,
                                     T* values, int64_t i) {
  int64_t grid_offset, at;
  Locate(g, i, &grid_offset, &at);
  values[i] = GatherPoint<T, kOrder, kNdim, kKernelFast<kNdim>>(g, grid + grid_offset, coords, at);
}

// `add(address, amount)`: atomicAdd on the device.
template <typename T, int kOrder, int kNdim, typename Add>
XLABIND_HOST_DEVICE void ScatterIndex(const Geometry& g, const Coordinates<T>& coords,
                                      const T* cotangents, T* grid, int64_t i, Add add) {
  const T ct = cotangents[i];  // even zero: a NaN weight makes it NaN, as in jax
  int64_t grid_offset, at;
  Locate(g, i, &grid_offset, &at);
  ScatterPoint<T, kOrder, kNdim, kKernelFast<kNdim>>(g, grid + grid_offset, coords, at, ct, add);
}

}  // namespace xlabind::map_coordinates

#endif  // XLABIND_FFI_OPS_MAP_COORDINATES_CUDA_POINT_BODIES_H_
