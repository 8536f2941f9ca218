// One source for the CPU and the GPU: functions marked XLABIND_HOST_DEVICE
// compile as inline host code under the C++ toolchain and as inlined
// __host__ __device__ code under nvcc, so a handler's arithmetic (an
// interpolation's weights, a filter's recursion) is written once for both.
//
//   XLABIND_HOST_DEVICE double Weight(double x) { return 1.0 - x; }
#ifndef XLABIND_FFI_NATIVE_HOST_DEVICE_H_
#define XLABIND_FFI_NATIVE_HOST_DEVICE_H_

#if defined(__CUDACC__)
// Marks a function nvcc compiles for both the host and the device, so one
// source serves the CPU and the GPU handlers: `__host__ __device__` under
// nvcc, a plain inline function under a C++ compiler (always inlined).
//
// Example:
//   XLABIND_HOST_DEVICE inline float Cubic(float t) { return t * t * t; }
#define XLABIND_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define XLABIND_HOST_DEVICE inline __attribute__((always_inline))
#endif

#endif  // XLABIND_FFI_NATIVE_HOST_DEVICE_H_
