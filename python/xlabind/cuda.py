"""What a function running inside a CUDA computation can ask xlabind.

A CUDA callback receives XLA's device buffers as :class:`DeviceArray` objects
(``__cuda_array_interface__`` version 3 and DLPack), valid during the call.
XLA's stream and device are on each array (``x.stream``, ``x.device``), and
for functions with no array arguments here:

>>> import xlabind.cuda
>>> xlabind.cuda.current_stream()  # outside a CUDA callback
Traceback (most recent call last):
RuntimeError: xlabind.cuda.current_stream() is only defined inside a CUDA callback
"""

from __future__ import annotations

from xlabind._runtime import extension

#: The type of the device arrays a CUDA callback receives.
DeviceArray = extension.DeviceArray

__all__ = ["DeviceArray", "current_device", "current_stream", "is_capturing"]


def _current() -> tuple[int, int]:
    call: tuple[int, int] | None = extension.cuda_current_call()
    if call is None:
        raise RuntimeError("xlabind.cuda.current_stream() is only defined inside a CUDA callback")
    return call


def current_stream() -> int:
    """XLA's CUDA stream (a ``CUstream`` as an integer) for the running callback.

    Work enqueued on it runs in order with XLA's own. CuPy's current stream is
    this stream during the call (and PyTorch's, when it is imported).

    Example (the lines marked GPU run where there is one, in tools/device_check.py):
      >>> import cupy  # doctest: +GPU
      >>> import jax, jax.numpy as jnp, xlabind, xlabind.cuda
      >>> def scale(x, *, out):
      ...     # CuPy is on XLA's stream already; code that takes a raw stream gets it so:
      ...     assert cupy.cuda.get_current_stream().ptr == xlabind.cuda.current_stream()
      ...     cupy.multiply(cupy.asarray(x), 2, out=cupy.asarray(out))
      >>> op = xlabind.callback(scale, lambda x: x, in_place=True, platforms=("cuda",))
      >>> op(jnp.ones(3, device=jax.devices("gpu")[0]))  # doctest: +GPU
      Array([2., 2., 2.], dtype=float32)
    """
    return _current()[0]


def current_device() -> int:
    """The CUDA device ordinal of the running callback.

    Example (the line marked GPU runs where there is one, in tools/device_check.py):
      >>> import jax, jax.numpy as jnp, xlabind, xlabind.cuda
      >>> seen = []
      >>> def look(x, *, out):
      ...     seen.append(xlabind.cuda.current_device())
      >>> op = xlabind.callback(look, lambda x: x, in_place=True, platforms=("cuda",))
      >>> _ = op(jnp.ones(3, device=jax.devices("gpu")[0])); seen  # doctest: +GPU
      [0]
    """
    return _current()[1]


def is_capturing() -> bool:
    """Whether XLA is capturing the running callback into a CUDA graph.

    Only a function bound with ``command_buffer_compatible=True`` is ever
    captured. During a capture it runs to record the work it launches, which
    XLA then replays without calling it, until the buffers' addresses change;
    host work (counting, logging, reading values) happens at capture only.
    False outside a capture and outside callbacks.

    Example (the line marked GPU runs where there is one, in tools/device_check.py):
      >>> import cupy  # doctest: +GPU
      >>> import xlabind, xlabind.cuda
      >>> captures = []
      >>> def double(x, *, out):
      ...     captures.append(xlabind.cuda.is_capturing())  # host work: at capture only
      ...     cupy.multiply(cupy.asarray(x), 2, out=cupy.asarray(out))
      >>> op = xlabind.callback(double, lambda x: x, in_place=True, platforms=("cuda",),
      ...                       command_buffer_compatible=True)
      >>> xlabind.cuda.is_capturing()  # outside a callback
      False
    """
    return bool(extension.cuda_call_is_capturing())
