// The CUDA half of example_scale: a launcher any C++ compiler can call.
#ifndef EXAMPLE_SCALE_KERNELS_H_
#define EXAMPLE_SCALE_KERNELS_H_

#include <cstdint>

extern "C" const char* ExampleScaleLaunchF32(const float* x, float* y, int64_t n,
                                             float factor, void* stream);

#endif  // EXAMPLE_SCALE_KERNELS_H_
