// What a CUDA callback returns, read through DLPack: the device address,
// shape, strides and element type of another library's array (CuPy,
// PyTorch, ...), so that xlabind can copy it into XLA's result buffer.
//
// Why DLPack first: it carries every dtype (bfloat16 included, which
// PyTorch's CUDA array interface labels "<f2"), and a producer asked for a
// capsule on XLA's stream orders its own work before that stream on the
// device, without blocking the host.
//
// A DlpackSource consumes its capsule (as the protocol asks of a consumer)
// and calls the producer's deleter on release() or when it dies.
#ifndef XLABIND_FFI_CUDA_DLPACK_SOURCE_H_
#define XLABIND_FFI_CUDA_DLPACK_SOURCE_H_

#include <nanobind/nanobind.h>

namespace xlabind {

// Registers the Python class `DlpackSource(capsule)` on `module`.
void DefineDlpackSource(nanobind::module_ module);

}  // namespace xlabind

#endif  // XLABIND_FFI_CUDA_DLPACK_SOURCE_H_
