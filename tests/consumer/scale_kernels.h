// The CUDA half of consumer_scale: a launcher any C++ compiler can call.
#ifndef CONSUMER_SCALE_KERNELS_H_
#define CONSUMER_SCALE_KERNELS_H_

#include <cstdint>

extern "C" const char* ConsumerScaleLaunchF32(const float* x, float* y, int64_t n, float factor,
                                              void* stream);

#endif  // CONSUMER_SCALE_KERNELS_H_
