// spline_filter's CUDA kernels: one thread per line, the recursions of
// line_filter.h on doubles in device memory.
#include <cuda_runtime.h>

#include "ffi/ops/spline_filter/cuda_kernels.h"
#include "ffi/ops/spline_filter/line_filter.h"

namespace xlabind::spline_filter {
namespace {

constexpr int kThreads = 128;

unsigned Blocks(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

const char* Status() {
  const cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? "" : cudaGetErrorString(error);
}

template <typename From, typename To>
__global__ void Convert(const From* in, To* out, int64_t size) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < size) out[i] = static_cast<To>(in[i]);
}

__global__ void Lines(double* work, int64_t length, int64_t stride, int64_t count, int order,
                      int boundary, int transpose) {
  const int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (k >= count) return;
  const Line line{work + (k / stride) * length * stride + k % stride, length, stride, 0};
  if (transpose) {
    FilterLineTranspose(line, order, boundary);
  } else {
    FilterLine(line, order, boundary);
  }
}

template <typename From, typename To>
const char* LaunchConvert(const From* in, To* out, int64_t size, void* stream) {
  if (size > 0)
    Convert<<<Blocks(size), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(in, out, size);
  return Status();
}

}  // namespace
}  // namespace xlabind::spline_filter

using namespace xlabind::spline_filter;  // NOLINT: the launchers' bodies only

extern "C" const char* XlabindSplineFilterToDoubleF32(const float* in, double* work, int64_t size,
                                                      void* stream) {
  return LaunchConvert(in, work, size, stream);
}

extern "C" const char* XlabindSplineFilterToDoubleF64(const double* in, double* work, int64_t size,
                                                      void* stream) {
  return LaunchConvert(in, work, size, stream);
}

extern "C" const char* XlabindSplineFilterFromDoubleF32(const double* work, float* out,
                                                        int64_t size, void* stream) {
  return LaunchConvert(work, out, size, stream);
}

extern "C" const char* XlabindSplineFilterLines(double* work, int64_t length, int64_t stride,
                                                int64_t count, int order, int boundary,
                                                int transpose, void* stream) {
  if (count > 0 && length > 1) {
    Lines<<<Blocks(count), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        work, length, stride, count, order, boundary, transpose);
  }
  return Status();
}
