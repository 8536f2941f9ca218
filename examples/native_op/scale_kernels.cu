// y = factor * x on the GPU, on XLA's stream.
#include <cuda_runtime.h>

#include "scale_kernels.h"

namespace {

__global__ void Scale(const float* x, float* y, int64_t n, float factor) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = factor * x[i];
}

}  // namespace

extern "C" const char* ExampleScaleLaunchF32(const float* x, float* y, int64_t n,
                                             float factor, void* stream) {
  const int threads = 256;
  const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
  if (blocks > 0) {
    Scale<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(x, y, n, factor);
  }
  const cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? "" : cudaGetErrorString(error);
}
