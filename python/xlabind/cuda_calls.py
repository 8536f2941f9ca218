"""The Python half of a CUDA callback: how the user's function is called on
XLA's stream, and how what it returns reaches XLA's result buffers.

* While the function runs, XLA's stream is CuPy's current stream (when CuPy
  can be imported) and PyTorch's (when PyTorch is already imported), so plain
  CuPy and PyTorch code is ordered with XLA's work, without any
  device-wide synchronisation.
* Returned device arrays are copied into XLA's buffers on the device, on
  XLA's stream, after the work of the stream they were produced on.
* ``synchronize=True`` waits for XLA's stream before the call and for the
  whole device after it, for code that uses streams of its own.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable

import numpy as np

from xlabind import _xlabind

_cupy_module: Any = None
_cupy_checked = False
_cupy_streams: dict[tuple[int, int], Any] = {}
_torch_streams: dict[tuple[int, int], Any] = {}


def _cupy():
    """CuPy, imported on the first CUDA call, or None when it is not installed."""
    global _cupy_module, _cupy_checked
    if not _cupy_checked:
        _cupy_checked = True
        try:
            import cupy  # noqa: PLC0415  (optional, and slow to import)

            _cupy_module = cupy
        except ImportError:
            _cupy_module = None
    return _cupy_module


def _on_xla_stream(stack: contextlib.ExitStack, stream: int, device: int) -> None:
    cupy = _cupy()
    if cupy is not None:
        cupy_stream = _cupy_streams.get((stream, device))
        if cupy_stream is None:
            cupy_stream = _cupy_streams[(stream, device)] = cupy.cuda.ExternalStream(
                stream, device_id=device)
        stack.enter_context(cupy.cuda.Device(device))
        stack.enter_context(cupy_stream)
    torch = sys.modules.get("torch")  # only if the program uses it already
    if torch is not None and torch.cuda.is_available():
        torch_stream = _torch_streams.get((stream, device))
        if torch_stream is None:
            torch_stream = _torch_streams[(stream, device)] = torch.cuda.ExternalStream(
                stream, device=torch.device("cuda", device))
        stack.enter_context(torch.cuda.stream(torch_stream))


def call_on_xla_stream(fn: Callable, args, kwargs, synchronize: bool):
    """fn(*args, **kwargs) with XLA's stream current for CuPy and PyTorch."""
    stream, device = _xlabind.cuda_current_call()
    with contextlib.ExitStack() as stack:
        _on_xla_stream(stack, stream, device)
        if synchronize:
            _xlabind.cuda_synchronize_stream(stream)
        result = fn(*args, **kwargs)
        if synchronize:
            _xlabind.cuda_synchronize_device(stream)
        return result


def store_result(name: str, index: int, value: Any, out) -> bool:
    """Copies the device array `value` into the result `out` (a DeviceArray) on
    XLA's stream. Returns whether `value` came from another stream (the caller
    then waits for the copies before letting it go)."""
    expected = (f"expected a device array of dtype {out.dtype} and shape {out.shape} (as "
                f"declared in result_shape_dtypes)")
    if value is None:
        raise TypeError(f"{name} returned None for result {index}; {expected}. A function that "
                        f"writes into `out` instead needs in_place=True.")
    interface = getattr(value, "__cuda_array_interface__", None)
    if interface is None:
        raise TypeError(f"{name}: result {index} is a {type(value).__name__}, not a device "
                        f"array; {expected}. Return a CuPy / PyTorch / Numba array, or write "
                        f"into `out` with in_place=True.")
    shape = tuple(interface["shape"])
    dtype = _dtype_of(interface["typestr"], out.dtype)
    if dtype != out.dtype:
        raise TypeError(f"{name}: result {index} has dtype {dtype}, {expected}. Cast it yourself "
                        f"(.astype(...)) on the device.")
    if shape != out.shape:
        raise ValueError(f"{name}: result {index} has shape {shape}, {expected}")
    strides = interface.get("strides")
    if strides is not None and tuple(strides) != _c_strides(shape, dtype.itemsize):
        raise ValueError(f"{name}: result {index} is not C-contiguous (strides {tuple(strides)}); "
                         f"return a contiguous array (e.g. cupy.ascontiguousarray)")
    source, _ = interface["data"]
    producer = interface.get("stream")
    foreign = producer is not None and producer != out.stream
    _xlabind.cuda_copy(out.ptr, source, out.nbytes, out.stream, producer if foreign else None)
    return foreign


def _dtype_of(typestr: str, expected: np.dtype) -> np.dtype:
    dtype = np.dtype(typestr)
    # ml_dtypes types (bfloat16, float8) travel as raw bytes ("V") of their size.
    if dtype.kind == "V" and expected.kind == "V" and dtype.itemsize == expected.itemsize:
        return expected
    return dtype


def _c_strides(shape, itemsize) -> tuple[int, ...]:
    strides, step = [], itemsize
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def returning_adapter(fn, name, kwargs, out_tree, unwrap_one_tuple, synchronize, flatten):
    """The handler's callable for a CUDA function that returns its results."""

    def adapter(operands, results):
        returned = call_on_xla_stream(fn, operands, kwargs, synchronize)
        leaves = flatten(returned)
        foreign = False
        for i, (value, out) in enumerate(zip(leaves, results)):
            foreign |= store_result(name, i, value, out)
        if foreign:
            # The sources may be freed (and reused by their stream) once we return.
            _xlabind.cuda_synchronize_stream(results[0].stream)

    return adapter


def in_place_function(fn, synchronize):
    """The handler's callable for a CUDA function that writes into `out`; the
    handler checks what it returns."""

    def run(*operands, **kwargs):
        return call_on_xla_stream(fn, operands, kwargs, synchronize)

    return run
