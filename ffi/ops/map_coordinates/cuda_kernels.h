// Launchers of the map_coordinates CUDA kernels (cuda_kernels.cu, compiled by
// nvcc), callable from C++ compiled by any toolchain: plain C types, XLA's
// stream as an opaque pointer. Each enqueues its work on `stream` and returns
// "" or the CUDA error's text.
#ifndef XLABIND_FFI_OPS_MAP_COORDINATES_CUDA_KERNELS_H_
#define XLABIND_FFI_OPS_MAP_COORDINATES_CUDA_KERNELS_H_

#include "ffi/ops/map_coordinates/interpolation.h"

extern "C" {

// values[b, p] = sum of weight * grid[b, node] (float32 / float64).
const char* XlabindMapCoordinatesGatherF32(
    const xlabind::map_coordinates::Geometry* geometry, const float* grid,
    const xlabind::map_coordinates::Coordinates<float>* coords, float* values, void* stream);
const char* XlabindMapCoordinatesGatherF64(
    const xlabind::map_coordinates::Geometry* geometry, const double* grid,
    const xlabind::map_coordinates::Coordinates<double>* coords, double* values, void* stream);

// grid = 0, then grid[b, node] += weight * cotangents[b, p] with atomics.
const char* XlabindMapCoordinatesScatterF32(
    const xlabind::map_coordinates::Geometry* geometry,
    const xlabind::map_coordinates::Coordinates<float>* coords, const float* cotangents,
    float* grid, long long grid_count, void* stream);
const char* XlabindMapCoordinatesScatterF64(
    const xlabind::map_coordinates::Geometry* geometry,
    const xlabind::map_coordinates::Coordinates<double>* coords, const double* cotangents,
    double* grid, long long grid_count, void* stream);
}

#endif  // XLABIND_FFI_OPS_MAP_COORDINATES_CUDA_KERNELS_H_
