// A native CUDA FFI handler that copies its operand into its result on XLA's
// stream (cuMemcpyDtoDAsync): the native baseline the GPU benchmark compares
// xlabind's CuPy and DLPack copies with.
#ifndef XLABIND_FFI_CUDA_COPY_HANDLER_H_
#define XLABIND_FFI_CUDA_COPY_HANDLER_H_

#include "xla/ffi/api/api.h"

extern "C" __attribute__((visibility("default"))) XLA_FFI_Error* XlabindCudaCopy(
    XLA_FFI_CallFrame* call_frame);

#endif  // XLABIND_FFI_CUDA_COPY_HANDLER_H_
