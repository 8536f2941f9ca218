"""The Python half of a CUDA callback: how the user's function is called on
XLA's stream, and how what it returns reaches XLA's result buffers.

Everything a call does is ordered on the device, by XLA's stream; the host
waits for the device only where nothing else is sound:

* While the function runs, XLA's stream is the current stream of CuPy (when
  it can be imported) and of PyTorch (when it is imported, before the call or
  during it), so plain CuPy and PyTorch code is ordered with XLA's work.
* The arguments' ``__cuda_array_interface__`` then exports no stream (the
  data is ordered for the current stream already), so consumers do not
  synchronize the host on it; where XLA's stream is not the current one
  (code that switched streams) it exports XLA's stream, and the consumer
  orders itself after it.
* Returned arrays are read through DLPack when they offer it, asked for on
  XLA's stream (the producer orders its work before that stream on the
  device), else through their CUDA array interface, read while XLA's stream
  is still current; then copied on XLA's stream. Only an array made on
  another stream (or when that cannot be told) costs a wait for XLA's stream
  after the copies, so that the producer cannot reuse the memory first.
* ``synchronize=True`` waits for XLA's stream before the call and for the
  whole device after it (also when the function raised), for code that uses
  streams of its own.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import sys
import threading
from typing import Any, Callable

import numpy as np

from xlabind._runtime import extension

_cupy_module: Any = None
_cupy_checked = False
_cupy_streams: dict[tuple[int, int], Any] = {}
_torch_streams: dict[tuple[int, int], Any] = {}
# DLPack's device types that live on a CUDA device (kDLCUDA, kDLCUDAManaged).
_CUDA_DEVICES = (2, 13)


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


def _torch():
    """PyTorch with CUDA, if the program has imported it."""
    torch = sys.modules.get("torch")
    return torch if torch is not None and torch.cuda.is_available() else None


def _enter_torch_stream(stack: contextlib.ExitStack, torch, stream: int, device: int) -> None:
    torch_stream = _torch_streams.get((stream, device))
    if torch_stream is None:
        torch_stream = _torch_streams[(stream, device)] = torch.cuda.ExternalStream(
            stream, device=torch.device("cuda", device))
    stack.enter_context(torch.cuda.stream(torch_stream))


# The calls running on this thread (callbacks may nest): (exit stack, stream, device).
_active = threading.local()


@contextlib.contextmanager
def on_xla_stream(synchronize: bool):
    """The running call's XLA stream as CuPy's and PyTorch's current stream, for
    the duration of the block; yields the stream."""
    stream, device = extension.cuda_current_call()
    with contextlib.ExitStack() as stack:
        cupy = _cupy()
        if cupy is not None:
            cupy_stream = _cupy_streams.get((stream, device))
            if cupy_stream is None:
                cupy_stream = _cupy_streams[(stream, device)] = cupy.cuda.ExternalStream(
                    stream, device_id=device)
            stack.enter_context(cupy.cuda.Device(device))
            stack.enter_context(cupy_stream)
        torch = _torch()
        if torch is not None:
            _enter_torch_stream(stack, torch, stream, device)
        calls = getattr(_active, "calls", None)
        if calls is None:
            calls = _active.calls = []
        calls.append((stack, stream, device))
        try:
            if synchronize:
                extension.cuda_synchronize_stream(stream)
            yield stream
        finally:
            calls.pop()
            if synchronize:
                # Work the function left on streams of its own may still use
                # XLA's buffers, which XLA frees or reuses after a failed run too.
                extension.cuda_synchronize_device(stream)


def call_on_xla_stream(fn: Callable, args, kwargs, synchronize: bool):
    """fn(*args, **kwargs) with XLA's stream current for CuPy and PyTorch."""
    with on_xla_stream(synchronize):
        return fn(*args, **kwargs)


def consumers_use_stream(stream: int, device: int) -> bool:
    """Whether CuPy's and PyTorch's current stream (those imported) is `stream`:
    then a device array needs no stream in its CUDA array interface."""
    checked = False
    cupy = _cupy_module if "cupy" in sys.modules else None
    try:
        if cupy is not None:
            checked = True
            if cupy.cuda.get_current_stream(device).ptr != stream:
                return False
        torch = _torch()
        if torch is not None:
            checked = True
            if torch.cuda.current_stream(device).cuda_stream != stream:
                return False
    except Exception:  # noqa: BLE001  (unknown: the consumer orders itself)
        return False
    return checked


extension.cuda_set_stream_probe(consumers_use_stream)


# -- PyTorch imported during a call -------------------------------------------
class _TorchImport(importlib.abc.MetaPathFinder):
    """Watches for the first `import torch`: when it happens inside a CUDA
    call, XLA's stream becomes PyTorch's current stream as soon as PyTorch is
    loaded, for the rest of that call (so the code after the import is
    ordered like the rest)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch":
            return None
        sys.meta_path.remove(self)  # one import, found the usual way
        spec = importlib.util.find_spec("torch")
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):  # this loader object only: it loads torch alone
            loader.__dict__.pop("exec_module", None)
            run(module)
            _torch_arrived()

        loader.exec_module = exec_module
        return spec


def _torch_arrived() -> None:
    calls = getattr(_active, "calls", None)
    torch = _torch() if calls else None
    for stack, stream, device in calls if torch is not None else ():
        _enter_torch_stream(stack, torch, stream, device)


if "torch" not in sys.modules:
    sys.meta_path.insert(0, _TorchImport())


# -- returned arrays ----------------------------------------------------------
def store_result(name: str, index: int, value: Any, out) -> bool:
    """Copies the device array `value` into the result `out` (a DeviceArray) on
    XLA's stream. Returns whether `value` may come from another stream (the
    caller then waits for the copies before letting it go)."""
    expected = (f"expected a device array of dtype {out.dtype} and shape {out.shape} (as "
                f"declared in result_shape_dtypes)")
    if value is None:
        raise TypeError(f"{name} returned None for result {index}; {expected}. A function that "
                        f"writes into `out` instead needs in_place=True.")
    device = getattr(value, "__dlpack_device__", None)
    if device is not None and getattr(value, "__dlpack__", None) is not None:
        device_type, device_id = device()
        if device_type not in _CUDA_DEVICES:
            raise TypeError(f"{name}: result {index} is a {type(value).__name__} on DLPack "
                            f"device type {device_type}, not a CUDA device array; {expected}. "
                            f"Return a CuPy / PyTorch array, or write into `out`.")
        return _store_from_dlpack(name, index, value, out, expected)
    interface = getattr(value, "__cuda_array_interface__", None)
    if interface is None:
        raise TypeError(f"{name}: result {index} is a {type(value).__name__}, not a device "
                        f"array; {expected}. Return a CuPy / PyTorch / Numba array, or write "
                        f"into `out` with in_place=True.")
    shape = tuple(interface["shape"])
    dtype = _dtype_of(interface["typestr"], out.dtype)
    _check(name, index, dtype, shape, interface.get("strides"), dtype.itemsize, out, expected)
    source, _ = interface["data"]
    producer = interface.get("stream")
    foreign = producer is not None and producer != out.stream
    extension.cuda_copy(out.ptr, source, out.nbytes, out.stream, producer if foreign else None)
    return foreign


def _store_from_dlpack(name, index, value, out, expected) -> bool:
    try:  # DLPack 1.0 consumers ask for a versioned capsule
        capsule = value.__dlpack__(stream=out.stream, max_version=(1, 1))
    except TypeError:
        capsule = value.__dlpack__(stream=out.stream)
    source = extension.DlpackSource(capsule)
    try:
        device_type, device_id = source.device
        if device_type not in _CUDA_DEVICES or device_id != out.device:
            raise ValueError(f"{name}: result {index} is on CUDA device {device_id}, XLA's "
                             f"buffer on device {out.device}; move it first")
        if source.dtype is None:
            raise TypeError(f"{name}: result {index} has a DLPack dtype xlabind does not know; "
                            f"{expected}")
        strides = source.strides
        itemsize = source.dtype.itemsize
        _check(name, index, source.dtype, tuple(source.shape),
               None if strides is None else tuple(s * itemsize for s in strides), itemsize, out,
               expected)
        # The producer has ordered its work before XLA's stream (the stream we
        # asked for): copy with no wait.
        extension.cuda_copy(out.ptr, source.ptr, out.nbytes, out.stream, None)
    finally:
        source.release()
    return not consumers_use_stream(out.stream, out.device)


def _check(name, index, dtype, shape, strides, itemsize, out, expected) -> None:
    """Raises, naming the function and result, unless the source fits `out`."""
    if dtype != out.dtype:
        raise TypeError(f"{name}: result {index} has dtype {dtype}, {expected}. Cast it yourself "
                        f"(.astype(...)) on the device.")
    if shape != out.shape:
        raise ValueError(f"{name}: result {index} has shape {shape}, {expected}")
    if strides is not None and tuple(strides) != _c_strides(shape, itemsize):
        raise ValueError(f"{name}: result {index} is not C-contiguous (strides {tuple(strides)}); "
                         f"return a contiguous array (e.g. cupy.ascontiguousarray)")


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
        with on_xla_stream(synchronize) as stream:
            # Read (and copied) while XLA's stream is still the current one:
            # what the results report about their streams is still true.
            leaves = flatten(fn(*operands, **kwargs))
            foreign = False
            for i, (value, out) in enumerate(zip(leaves, results)):
                foreign |= store_result(name, i, value, out)
        if foreign:
            # The sources may be freed (and reused by their stream) once we return.
            extension.cuda_synchronize_stream(stream)

    return adapter


def in_place_function(fn, synchronize):
    """The handler's callable for a CUDA function that writes into `out`; the
    handler checks what it returns."""

    def run(*operands, **kwargs):
        return call_on_xla_stream(fn, operands, kwargs, synchronize)

    return run
