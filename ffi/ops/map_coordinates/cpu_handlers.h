// map_coordinates on the CPU (XLA FFI, typed API): the linear map from a grid
// to its interpolated values at given coordinates, and its transpose (a
// scatter-add), both split across threads for large inputs. See
// interpolation.h for the arithmetic and geometry.h for the buffers.
//
// Attributes: order (i64, 0 or 1), mode (i64, interpolation.h's Mode),
// derivative (i64 array, one per grid dimension: how often each axis's
// weights are differentiated). Points outside the grid in constant mode
// contribute zero; xlabind.ops adds the constant value in Python.
#ifndef XLABIND_FFI_OPS_MAP_COORDINATES_CPU_HANDLERS_H_
#define XLABIND_FFI_OPS_MAP_COORDINATES_CPU_HANDLERS_H_

#include "xla/ffi/api/api.h"

// (grid, coordinates along axis 0, ..., along axis ndim - 1) -> values
extern "C" XLA_FFI_Error* XlabindMapCoordinatesCpu(XLA_FFI_CallFrame* call_frame);
// (coordinates along each axis..., value cotangents) -> grid cotangent
extern "C" XLA_FFI_Error* XlabindMapCoordinatesTransposeCpu(XLA_FFI_CallFrame* call_frame);

#endif  // XLABIND_FFI_OPS_MAP_COORDINATES_CPU_HANDLERS_H_
