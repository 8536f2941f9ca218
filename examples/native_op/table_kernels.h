// The CUDA half of example_table: launchers any C++ compiler can call.
#ifndef EXAMPLE_TABLE_KERNELS_H_
#define EXAMPLE_TABLE_KERNELS_H_

#include <cstdint>

// Copies a table of `size` values to the device (at instantiate: no stream,
// once per executable). "" on success, else CUDA's error.
extern "C" const char* ExampleTableUpload(const double* values, int64_t size,
                                          double** device);
extern "C" void ExampleTableFree(double* device);

// y = table(x), in two kernels on `stream`: each x's position in the table
// goes to `scratch` (n doubles), then is interpolated.
extern "C" const char* ExampleTableLaunchF32(const double* table, int64_t size,
                                             double lo, double hi, const float* x,
                                             float* y, double* scratch, int64_t n,
                                             void* stream);

// dy = table'(x) * t, one kernel, no scratch.
extern "C" const char* ExampleTableJvpLaunchF32(const double* table, int64_t size,
                                                double lo, double hi, const float* x,
                                                const float* t, float* dy, int64_t n,
                                                void* stream);

#endif  // EXAMPLE_TABLE_KERNELS_H_
