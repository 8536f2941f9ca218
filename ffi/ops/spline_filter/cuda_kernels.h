// Launchers of the spline_filter CUDA kernels (cuda_kernels.cu, compiled by
// nvcc), callable from C++ compiled by any toolchain. Each enqueues its work
// on `stream` and returns "" or the CUDA error's text.
#ifndef XLABIND_FFI_OPS_SPLINE_FILTER_CUDA_KERNELS_H_
#define XLABIND_FFI_OPS_SPLINE_FILTER_CUDA_KERNELS_H_

#include <cstdint>

extern "C" {

// work[i] = in[i] (float32 / float64 to double), and back.
const char* XlabindSplineFilterToDoubleF32(const float* in, double* work, int64_t size,
                                           void* stream);
const char* XlabindSplineFilterToDoubleF64(const double* in, double* work, int64_t size,
                                           void* stream);
const char* XlabindSplineFilterFromDoubleF32(const double* work, float* out, int64_t size,
                                             void* stream);

// Filters (or transposes) `count` lines of `length` doubles `stride` apart,
// line k starting at (k / stride) * length * stride + k % stride; one thread
// a line.
const char* XlabindSplineFilterLines(double* work, int64_t length, int64_t stride, int64_t count,
                                     int order, int boundary, int transpose, void* stream);
}

#endif  // XLABIND_FFI_OPS_SPLINE_FILTER_CUDA_KERNELS_H_
