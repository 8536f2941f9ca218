// spline_filter's CPU handlers (XLA FFI): the B-spline prefilter of
// scipy.ndimage.spline_filter along some axes, and its transpose.
#ifndef XLABIND_FFI_OPS_SPLINE_FILTER_CPU_HANDLERS_H_
#define XLABIND_FFI_OPS_SPLINE_FILTER_CPU_HANDLERS_H_

#include "xla/ffi/api/c_api.h"

extern "C" {
XLA_FFI_Error* XlabindSplineFilterCpu(XLA_FFI_CallFrame* frame);
XLA_FFI_Error* XlabindSplineFilterTransposeCpu(XLA_FFI_CallFrame* frame);
}

#endif  // XLABIND_FFI_OPS_SPLINE_FILTER_CPU_HANDLERS_H_
