// example_table on the GPU: the table lives in device memory its state owns.
#include <cuda_runtime.h>

#include "table_kernels.h"

namespace {

constexpr int kThreads = 256;

// x's position in the table's nodes, clamped to [0, size - 1] (fmin/fmax
// would turn a NaN into a bound: NaN stays NaN).
__device__ double Position(double x, int64_t size, double lo, double hi) {
  const double t = (x - lo) / (hi - lo) * static_cast<double>(size - 1);
  return isnan(t) ? t : fmin(fmax(t, 0.0), static_cast<double>(size - 1));
}

__global__ void Locate(const float* x, double* position, int64_t n, int64_t size,
                       double lo, double hi) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) position[i] = Position(x[i], size, lo, hi);
}

__global__ void Interpolate(const double* table, int64_t size, const double* position,
                            float* y, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  if (isnan(position[i])) {  // x is NaN
    y[i] = static_cast<float>(position[i]);
    return;
  }
  const int64_t cell = min(static_cast<int64_t>(position[i]), size - 2);
  const double w = position[i] - static_cast<double>(cell);
  y[i] = static_cast<float>(table[cell] * (1.0 - w) + table[cell + 1] * w);
}

__global__ void Jvp(const double* table, int64_t size, double lo, double hi,
                    const float* x, const float* t, float* dy, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  if (!(x[i] >= lo && x[i] <= hi)) {  // flat outside the range; NaN stays NaN
    dy[i] = isnan(x[i]) ? x[i] : 0.0f;
    return;
  }
  const int64_t cell =
      min(static_cast<int64_t>(Position(x[i], size, lo, hi)), size - 2);
  const double slope =
      (table[cell + 1] - table[cell]) * static_cast<double>(size - 1) / (hi - lo);
  dy[i] = static_cast<float>(slope * t[i]);
}

unsigned Blocks(int64_t n) {
  return static_cast<unsigned>((n + kThreads - 1) / kThreads);
}

const char* LastError() {
  const cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? "" : cudaGetErrorString(error);
}

}  // namespace

extern "C" const char* ExampleTableUpload(const double* values, int64_t size,
                                          double** device) {
  if (cudaMalloc(device, size * sizeof(double)) != cudaSuccess) return LastError();
  if (cudaMemcpy(*device, values, size * sizeof(double), cudaMemcpyHostToDevice) !=
      cudaSuccess) {
    return LastError();
  }
  return "";
}

extern "C" void ExampleTableFree(double* device) { cudaFree(device); }

extern "C" const char* ExampleTableLaunchF32(const double* table, int64_t size,
                                             double lo, double hi, const float* x,
                                             float* y, double* scratch, int64_t n,
                                             void* stream) {
  if (n == 0) return "";
  auto on = static_cast<cudaStream_t>(stream);
  Locate<<<Blocks(n), kThreads, 0, on>>>(x, scratch, n, size, lo, hi);
  Interpolate<<<Blocks(n), kThreads, 0, on>>>(table, size, scratch, y, n);
  return LastError();
}

extern "C" const char* ExampleTableJvpLaunchF32(const double* table, int64_t size,
                                                double lo, double hi, const float* x,
                                                const float* t, float* dy, int64_t n,
                                                void* stream) {
  if (n == 0) return "";
  Jvp<<<Blocks(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(table, size, lo,
                                                                     hi, x, t, dy, n);
  return LastError();
}
