// spline_filter on CUDA devices (XLA FFI, typed API): the same targets,
// buffers and attributes as cpu_handlers.h, running cuda_kernels.cu on XLA's
// stream; float32 works in scratch memory from XLA's allocator.
#ifndef XLABIND_FFI_OPS_SPLINE_FILTER_CUDA_HANDLERS_H_
#define XLABIND_FFI_OPS_SPLINE_FILTER_CUDA_HANDLERS_H_

#include "xla/ffi/api/c_api.h"

extern "C" {
XLA_FFI_Error* XlabindSplineFilterCuda(XLA_FFI_CallFrame* frame);
XLA_FFI_Error* XlabindSplineFilterTransposeCuda(XLA_FFI_CallFrame* frame);
}

#endif  // XLABIND_FFI_OPS_SPLINE_FILTER_CUDA_HANDLERS_H_
