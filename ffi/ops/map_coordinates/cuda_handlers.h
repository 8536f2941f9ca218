// map_coordinates on CUDA devices (XLA FFI, typed API): the same targets,
// buffers and attributes as cpu_handlers.h, running cuda_kernels.cu on XLA's
// stream. Marked compatible with command buffers (CUDA graphs): they launch
// kernels and a memset on XLA's stream and nothing else.
#ifndef XLABIND_FFI_OPS_MAP_COORDINATES_CUDA_HANDLERS_H_
#define XLABIND_FFI_OPS_MAP_COORDINATES_CUDA_HANDLERS_H_

#include "xla/ffi/api/api.h"

extern "C" XLA_FFI_Error* XlabindMapCoordinatesCuda(XLA_FFI_CallFrame* call_frame);
extern "C" XLA_FFI_Error* XlabindMapCoordinatesTransposeCuda(XLA_FFI_CallFrame* call_frame);

#endif  // XLABIND_FFI_OPS_MAP_COORDINATES_CUDA_HANDLERS_H_
