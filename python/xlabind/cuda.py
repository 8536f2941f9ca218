"""What a function running inside a CUDA computation can ask xlabind.

A CUDA callback receives XLA's device buffers as :class:`DeviceArray` objects
(``__cuda_array_interface__`` version 3 and DLPack), valid during the call.
XLA's stream and device are on each array (``x.stream``, ``x.device``), and
for functions with no array arguments here:

>>> import xlabind.cuda
>>> xlabind.cuda.current_stream()  # outside a CUDA callback  # doctest: +SKIP
Traceback (most recent call last):
RuntimeError: xlabind.cuda.current_stream() is only defined inside a CUDA callback
"""

from __future__ import annotations

from xlabind import _xlabind

#: The type of the device arrays a CUDA callback receives.
DeviceArray = _xlabind.DeviceArray

__all__ = ["DeviceArray", "current_device", "current_stream"]


def _current() -> tuple[int, int]:
    call = _xlabind.cuda_current_call()
    if call is None:
        raise RuntimeError("xlabind.cuda.current_stream() is only defined inside a CUDA "
                           "callback")
    return call


def current_stream() -> int:
    """XLA's CUDA stream (a ``CUstream`` as an integer) for the running callback.

    Work enqueued on it runs in order with XLA's own. CuPy's current stream is
    this stream during the call (and PyTorch's, when it is imported).
    """
    return _current()[0]


def current_device() -> int:
    """The CUDA device ordinal of the running callback."""
    return _current()[1]
