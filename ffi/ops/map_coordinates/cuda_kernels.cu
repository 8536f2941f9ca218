// map_coordinates' CUDA kernels: one thread per (batch element, point), each
// index's body in cuda_point_bodies.h (which the tests also run on the host),
// each point computed by the CPU's own per-point code (points.h): the interior
// cell of its order where the point lies inside, every node through the
// boundary mode elsewhere. The transpose adds into the grid with atomicAdd
// (float64 needs sm_60 or newer; xlabind builds for sm_80 and sm_90).
// Launched on XLA's stream, with no allocation and no synchronisation, so
// XLA may capture them in CUDA graphs.
#include <cuda_runtime.h>

#include <type_traits>

#include "ffi/ops/map_coordinates/cuda_kernels.h"
#include "ffi/ops/map_coordinates/cuda_point_bodies.h"
#include "ffi/ops/map_coordinates/interpolation.h"

namespace xlabind::map_coordinates {
namespace {

constexpr int kThreads = 256;

// The kernels take Geometry and Coordinates by value: bytes copied to the
// device at launch, so plain data, and with the two pointers within the
// 4 KiB of parameters a launch may pass.
static_assert(std::is_trivially_copyable_v<Geometry>, "Geometry is a kernel parameter");
static_assert(std::is_trivially_copyable_v<Coordinates<double>>,
              "Coordinates are a kernel parameter");
static_assert(sizeof(Geometry) + sizeof(Coordinates<double>) + 2 * sizeof(void*) <= 4096,
              "a kernel's parameters must fit in 4 KiB");

struct AtomicAdd {
  template <typename T>
  __device__ void operator()(T* address, T amount) const {
    atomicAdd(address, amount);
  }
};

template <typename T, int kOrder, int kNdim>
__global__ void GatherKernel(Geometry g, const T* grid, Coordinates<T> coords, T* values) {
  const int64_t total = g.batch * g.points;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    GatherIndex<T, kOrder, kNdim>(g, grid, coords, values, i);
  }
}

template <typename T, int kOrder, int kNdim>
__global__ void ScatterKernel(Geometry g, Coordinates<T> coords, const T* cotangents, T* grid) {
  const int64_t total = g.batch * g.points;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    ScatterIndex<T, kOrder, kNdim>(g, coords, cotangents, grid, i, AtomicAdd{});
  }
}

unsigned Blocks(int64_t total) {
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 32 ? (blocks > 0 ? blocks : 1) : 65535 * 32);
}

const char* Status() {
  const cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? "" : cudaGetErrorString(error);
}

template <typename T>
const char* Gather(const Geometry* g, const T* grid, const Coordinates<T>* coords, T* values,
                   void* stream) {
  DispatchKernel(*g, [&](auto order, auto rank) {
    GatherKernel<T, decltype(order)::value, decltype(rank)::value>
        <<<Blocks(g->batch * g->points), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
            *g, grid, *coords, values);
  });
  return Status();
}

template <typename T>
const char* Scatter(const Geometry* g, const Coordinates<T>* coords, const T* cotangents, T* grid,
                    long long grid_count, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (cudaMemsetAsync(grid, 0, sizeof(T) * grid_count, s) != cudaSuccess) return Status();
  DispatchKernel(*g, [&](auto order, auto rank) {
    ScatterKernel<T, decltype(order)::value, decltype(rank)::value>
        <<<Blocks(g->batch * g->points), kThreads, 0, s>>>(*g, *coords, cotangents, grid);
  });
  return Status();
}

}  // namespace
}  // namespace xlabind::map_coordinates

using xlabind::map_coordinates::Coordinates;
using xlabind::map_coordinates::Geometry;

extern "C" const char* XlabindMapCoordinatesGatherF32(const Geometry* g, const float* grid,
                                                      const Coordinates<float>* coords,
                                                      float* values, void* stream) {
  return xlabind::map_coordinates::Gather(g, grid, coords, values, stream);
}

extern "C" const char* XlabindMapCoordinatesGatherF64(const Geometry* g, const double* grid,
                                                      const Coordinates<double>* coords,
                                                      double* values, void* stream) {
  return xlabind::map_coordinates::Gather(g, grid, coords, values, stream);
}

extern "C" const char* XlabindMapCoordinatesScatterF32(const Geometry* g,
                                                       const Coordinates<float>* coords,
                                                       const float* cotangents, float* grid,
                                                       long long grid_count, void* stream) {
  return xlabind::map_coordinates::Scatter(g, coords, cotangents, grid, grid_count, stream);
}

extern "C" const char* XlabindMapCoordinatesScatterF64(const Geometry* g,
                                                       const Coordinates<double>* coords,
                                                       const double* cotangents, double* grid,
                                                       long long grid_count, void* stream) {
  return xlabind::map_coordinates::Scatter(g, coords, cotangents, grid, grid_count, stream);
}
