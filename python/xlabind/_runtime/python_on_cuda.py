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

import importlib.abc
import importlib.util
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from xlabind._runtime import extension

_cupy_module: Any = None
_cupy_checked = False
# DLPack's device types that live on a CUDA device (kDLCUDA, kDLCUDAManaged).
_CUDA_DEVICES = (2, 13)


def _cupy():
    """CuPy, imported on the first CUDA call, or None when it is not installed."""
    global _cupy_module, _cupy_checked
    if not _cupy_checked:
        _cupy_checked = True
        try:
            import cupy

            _cupy_module = cupy
        except ImportError:
            _cupy_module = None
    return _cupy_module


# -- XLA's stream as CuPy's and PyTorch's current stream ---------------------
# Every call pays for this, so it is plain code: no context managers, no
# objects made per call. The CUDA handler has made the stream's device
# current already (cuda::ScopedStreamContext), as CuPy requires.
class _StreamProtocol:
    """A raw stream as the CUDA stream protocol describes one (`__cuda_stream__`)."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int):
        self.ptr = ptr

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.ptr)


def _cupy_stream(cupy, stream: int, device: int):
    """CuPy's object for XLA's `stream`: Stream.from_external from CuPy 14 on
    (its ExternalStream warns, and is an error under -W error); it leaves the
    device unset, which the handler has made current already."""
    from_external = getattr(getattr(cupy.cuda, "Stream", None), "from_external", None)
    if from_external is not None:
        return from_external(_StreamProtocol(stream))
    return cupy.cuda.ExternalStream(stream, device_id=device)


class _Streams:
    """XLA's stream (of one device) as CuPy and PyTorch name it, made once."""

    __slots__ = ("stream", "device", "cupy", "cupy_current", "torch")

    def __init__(self, stream: int, device: int):
        self.stream, self.device = stream, device
        cupy = _cupy()
        self.cupy = None if cupy is None else _cupy_stream(cupy, stream, device)
        self.cupy_current = None if cupy is None else cupy.cuda.get_current_stream
        self.torch: Any = None  # (stream_id, device_index, device_type), once PyTorch is used


_streams: dict[tuple[int, int], _Streams] = {}


class _TorchStreams:
    """PyTorch's current stream, read and set by id: torch._C's entry points
    where this PyTorch has them (torch.cuda.current_stream builds a Stream
    object per read), else the public ones."""

    def __init__(self, torch):
        self.torch = torch
        c = getattr(torch, "_C", None)
        get_by_id = getattr(c, "_cuda_getCurrentStream", None)
        set_by_id = getattr(c, "_cuda_setStream", None)
        if get_by_id is None or set_by_id is None:
            get_by_id, set_by_id = self._public_get, self._public_set
        self.get_by_id: Callable[..., Any] = get_by_id
        self.set_by_id: Callable[..., Any] = set_by_id

    def _public_get(self, device):
        s = self.torch.cuda.current_stream(device)
        return (s.stream_id, s.device_index, s.device_type)

    def _public_set(self, stream_id, device_index, device_type):
        self.torch.cuda.set_stream(
            self.torch.cuda.Stream(
                stream_id=stream_id, device_index=device_index, device_type=device_type
            )
        )

    def id_of(self, streams: _Streams):
        if streams.torch is None:
            s = self.torch.cuda.ExternalStream(
                streams.stream, device=self.torch.device("cuda", streams.device)
            )
            streams.torch = (s.stream_id, s.device_index, s.device_type)
        return streams.torch

    def enter(self, streams: _Streams):
        """Makes XLA's stream PyTorch's current one; returns the previous one."""
        previous = self.get_by_id(streams.device)
        stream_id, device_index, device_type = self.id_of(streams)
        self.set_by_id(stream_id=stream_id, device_index=device_index, device_type=device_type)
        return previous

    def exit(self, previous) -> None:
        self.set_by_id(stream_id=previous[0], device_index=previous[1], device_type=previous[2])


_torch_streams: _TorchStreams | None = None


def _torch_in_use(initializing: bool = False) -> _TorchStreams | None:
    """PyTorch's streams, when the program has imported PyTorch and PyTorch has
    initialized CUDA (or is initializing it: `initializing`). Until then it
    has no current stream to set; _torch_initializing sets it when the
    initialization happens during a call."""
    global _torch_streams
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    streams = _torch_streams
    if streams is not None and streams.torch is torch:
        return streams
    if not initializing:
        is_initialized = getattr(getattr(torch, "cuda", None), "is_initialized", None)
        if is_initialized is None or not is_initialized():
            _watch_torch_initialization(torch)
            return None
    _torch_streams = streams = _TorchStreams(torch)
    return streams


_watched_torch: Any = None


def _watch_torch_initialization(torch) -> None:
    """Asks PyTorch (once) to tell us when it initializes CUDA: inside a call,
    XLA's stream then becomes its current stream for the rest of the call."""
    global _watched_torch
    if _watched_torch is torch:
        return
    _watched_torch = torch
    lazy_call = getattr(torch.cuda, "_lazy_call", None)
    if lazy_call is not None:
        lazy_call(_torch_initializing)


def _torch_initializing() -> None:
    # PyTorch runs this during its CUDA initialization, before it calls itself
    # initialized; an exception here would fail that initialization.
    try:
        _torch_arrived(initializing=True)
    except Exception as error:
        import warnings

        warnings.warn(
            f"xlabind could not make XLA's stream PyTorch's current stream when "
            f"PyTorch initialized CUDA inside a callback ({error}); PyTorch work in "
            f"this call is not ordered with XLA's",
            RuntimeWarning,
            stacklevel=1,
        )


class _ThisThread(threading.local):
    def __init__(self):
        # The calls running on this thread (callbacks may nest): [streams,
        # PyTorch's previous stream or None], innermost last.
        self.calls: list[list] = []


_active = _ThisThread()


def _enter(synchronize: bool) -> list:
    """Makes the running call's stream current; returns what _exit undoes."""
    key = extension.cuda_current_call()
    streams = _streams.get(key)
    if streams is None:
        streams = _streams[key] = _Streams(*key)
    if streams.cupy is not None:
        streams.cupy.__enter__()
    call = [streams, None]
    try:
        torch = _torch_in_use()
        if torch is not None:
            call[1] = torch.enter(streams)
        _active.calls.append(call)
        if synchronize:
            extension.cuda_synchronize_stream(streams.stream)
    except BaseException:
        _exit(call, False)
        raise
    return call


def _exit(call: list, synchronize: bool) -> None:
    streams, torch_previous = call
    calls = _active.calls
    if calls and calls[-1] is call:
        calls.pop()
    try:
        if torch_previous is not None:  # _enter set PyTorch's stream: _torch_streams is set
            cast(_TorchStreams, _torch_streams).exit(torch_previous)
    finally:
        if streams.cupy is not None:
            streams.cupy.__exit__(None, None, None)
        if synchronize:
            # Work the function left on streams of its own may still use
            # XLA's buffers, which XLA frees or reuses after a failed run too.
            extension.cuda_synchronize_device(streams.stream)


def call_on_xla_stream(fn: Callable, args, kwargs, synchronize: bool):
    """fn(*args, **kwargs) with XLA's stream current for CuPy and PyTorch."""
    call = _enter(synchronize)
    try:
        return fn(*args, **kwargs)
    finally:
        _exit(call, synchronize)


def consumers_use_stream(stream: int, device: int) -> bool:
    """Whether CuPy's and PyTorch's current stream (those imported) is `stream`:
    then a device array needs no stream in its CUDA array interface."""
    calls = _active.calls
    if not calls:
        return _consumers_use_stream_outside_calls(stream, device)
    streams, torch_previous = calls[-1]
    if streams.stream != stream or streams.device != device:
        return _consumers_use_stream_outside_calls(stream, device)
    # Installed by the running call: only code that switched streams since
    # can have changed the answer, and asking is cheap.
    try:
        cupy_stream = streams.cupy
        if cupy_stream is not None:
            current = streams.cupy_current(device)
            if current is not cupy_stream and current.ptr != stream:
                return False
        # This call entered PyTorch's stream: no need to ask whether PyTorch is in use.
        torch = _torch_streams if torch_previous is not None else _torch_in_use()
        if torch is not None:
            if torch.get_by_id(device)[0] != torch.id_of(streams)[0]:
                return False
        return cupy_stream is not None or torch is not None
    except Exception:
        return False


def _consumers_use_stream_outside_calls(stream: int, device: int) -> bool:
    try:
        checked = False
        cupy = _cupy_module if "cupy" in sys.modules else None
        if cupy is not None:
            checked = True
            if cupy.cuda.get_current_stream(device).ptr != stream:
                return False
        torch = _torch_in_use()
        if torch is not None:
            checked = True
            if torch.torch.cuda.current_stream(device).cuda_stream != stream:
                return False
        return checked
    except Exception:
        return False


extension.cuda_set_stream_probe(consumers_use_stream)


# -- PyTorch imported or initialized during a call ----------------------------
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


def _torch_arrived(initializing: bool = False) -> None:
    """PyTorch was imported, or is initializing CUDA: the calls running on
    this thread put XLA's stream in force for it too."""
    calls = _active.calls
    if not calls:
        return
    torch = _torch_in_use(initializing)
    if torch is None:
        return
    for call in calls:
        if call[1] is None:
            call[1] = torch.enter(call[0])


if "torch" not in sys.modules:
    sys.meta_path.insert(0, _TorchImport())


# -- returned arrays ----------------------------------------------------------
def store_result(name: str, index: int, value: Any, out) -> bool:
    """Copies the device array `value` into the result `out` (a DeviceArray) on
    XLA's stream. Returns whether `value` may come from another stream (the
    caller then waits for the copies before letting it go)."""
    if value is None:
        raise TypeError(
            f"{name} returned None for result {index}; {_expected(out)}. A function "
            f"that writes into `out` instead needs in_place=True."
        )
    device = getattr(value, "__dlpack_device__", None)
    if device is not None and getattr(value, "__dlpack__", None) is not None:
        device_type, device_id = device()
        if device_type not in _CUDA_DEVICES:
            raise TypeError(
                f"{name}: result {index} is a {type(value).__name__} on DLPack "
                f"device type {device_type}, not a CUDA device array; "
                f"{_expected(out)}. Return a CuPy / PyTorch array, or write into "
                f"`out`."
            )
        return _store_from_dlpack(name, index, value, out)
    interface = getattr(value, "__cuda_array_interface__", None)
    if interface is None:
        raise TypeError(
            f"{name}: result {index} is a {type(value).__name__}, not a device "
            f"array; {_expected(out)}. Return a CuPy / PyTorch / Numba array, or "
            f"write into `out` with in_place=True."
        )
    shape = tuple(interface["shape"])
    dtype = _dtype_of(interface["typestr"], out.dtype)
    _check(name, index, dtype, shape, interface.get("strides"), dtype.itemsize, out)
    source, _ = interface["data"]
    producer = interface.get("stream")
    foreign = producer is not None and producer != out.stream
    extension.cuda_copy(out.ptr, source, out.nbytes, out.stream, producer if foreign else None)
    return foreign


def _expected(out) -> str:
    return (
        f"expected a device array of dtype {out.dtype} and shape {out.shape} (as declared "
        f"in result_shape_dtypes)"
    )


def _store_from_dlpack(name, index, value, out) -> bool:
    try:  # DLPack 1.0 consumers ask for a versioned capsule
        capsule = value.__dlpack__(stream=out.stream, max_version=(1, 1))
    except TypeError:
        capsule = value.__dlpack__(stream=out.stream)
    source = extension.DlpackSource(capsule)
    try:
        device_type, device_id = source.device
        if device_type not in _CUDA_DEVICES or device_id != out.device:
            raise ValueError(
                f"{name}: result {index} is on CUDA device {device_id}, XLA's "
                f"buffer on device {out.device}; move it first"
            )
        if source.dtype is None:
            raise TypeError(
                f"{name}: result {index} has a DLPack dtype xlabind does not know; {_expected(out)}"
            )
        strides = source.strides
        itemsize = source.dtype.itemsize
        _check(
            name,
            index,
            source.dtype,
            tuple(source.shape),
            None if strides is None else tuple(s * itemsize for s in strides),
            itemsize,
            out,
        )
        # The producer has ordered its work before XLA's stream (the stream we
        # asked for): copy with no wait.
        extension.cuda_copy(out.ptr, source.ptr, out.nbytes, out.stream, None)
    finally:
        source.release()
    return not consumers_use_stream(out.stream, out.device)


def _check(name, index, dtype, shape, strides, itemsize, out) -> None:
    """Raises, naming the function and result, unless the source fits `out`."""
    if dtype != out.dtype:
        raise TypeError(
            f"{name}: result {index} has dtype {dtype}, {_expected(out)}. Cast it "
            f"yourself (.astype(...)) on the device."
        )
    if shape != out.shape:
        raise ValueError(f"{name}: result {index} has shape {shape}, {_expected(out)}")
    if strides is not None and tuple(strides) != _c_strides(shape, itemsize):
        raise ValueError(
            f"{name}: result {index} is not C-contiguous (strides {tuple(strides)}); "
            f"return a contiguous array (e.g. cupy.ascontiguousarray)"
        )


_typestrs: dict[str, np.dtype] = {}


def _dtype_of(typestr: str, expected: np.dtype) -> np.dtype:
    dtype = _typestrs.get(typestr)
    if dtype is None:
        dtype = _typestrs[typestr] = np.dtype(typestr)
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
        call = _enter(synchronize)
        try:
            # Read (and copied) while XLA's stream is still the current one:
            # what the results report about their streams is still true.
            leaves = flatten(fn(*operands, **kwargs))
            foreign = False
            for i, (value, out) in enumerate(zip(leaves, results)):
                foreign |= store_result(name, i, value, out)
        finally:
            _exit(call, synchronize)
        if foreign:
            # The sources may be freed (and reused by their stream) once we return.
            extension.cuda_synchronize_stream(call[0].stream)

    return adapter


def in_place_function(fn, synchronize, capturable=False, name=None):
    """The handler's callable for a CUDA function that writes into `out`; the
    handler checks what it returns. A capturable one (command_buffer_compatible)
    says, when it fails during a capture, what a capture does not allow, and
    may not allocate with CuPy while it is captured."""

    def run(*operands, **kwargs):
        return call_on_xla_stream(fn, operands, kwargs, synchronize)

    if not capturable:
        return run
    name = name or getattr(fn, "__qualname__", "the function")

    def refuse(size):
        # A block from CuPy's pool would be recorded into the graph and go
        # back to the pool when the call returns: every replay would then
        # write memory the pool may have given another array since.
        raise RuntimeError(
            f"xlabind: {name} asked CuPy for {size} bytes of device memory while XLA "
            f"captured it into a CUDA graph (command_buffer_compatible=True). Memory "
            f"allocated during a capture is recorded into the graph but freed when the call "
            f"returns, so every replay would use memory that may belong to another array by "
            f"then. Write into `out` (out=...) and allocate nothing, or bind it without "
            f"command_buffer_compatible."
        )

    def run_capturable(*operands, **kwargs):
        capturing = extension.cuda_call_is_capturing()
        cupy = _cupy_module if capturing and "cupy" in sys.modules else None
        try:
            if cupy is None:
                return call_on_xla_stream(fn, operands, kwargs, False)
            with cupy.cuda.using_allocator(refuse):
                return call_on_xla_stream(fn, operands, kwargs, False)
        except Exception as error:
            if capturing:
                error.add_note(CAPTURE_NOTE)
                # XLA checks the capture before the call's status: where this
                # failure invalidated the capture, its user sees only
                # CUDA_ERROR_STREAM_CAPTURE_INVALIDATED. Said here too, then.
                first = (str(error).splitlines() or [""])[0][:300]
                warnings.warn(
                    f"xlabind: {name} failed while XLA captured it into a CUDA "
                    f"graph ({type(error).__name__}: {first}); XLA may report this "
                    f"only as CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.",
                    RuntimeWarning,
                    stacklevel=2,
                )
            raise

    return run_capturable


#: What a failure during a CUDA graph capture adds to its message.
CAPTURE_NOTE = (
    "xlabind: this call was being captured into a CUDA graph (command_buffer_compatible=True): "
    "it must only launch work on the current stream. Reading results on the host, "
    "synchronizing, allocating device memory (a new CuPy array: write into `out` with out=), "
    "and other streams are not allowed during a capture. Call it once outside a graph first "
    "so that CuPy compiles its kernels, or bind it without command_buffer_compatible."
)
