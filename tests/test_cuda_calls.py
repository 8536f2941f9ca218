"""The Python half of CUDA callbacks, checked on the CPU with stand-ins for the
GPU: XLA's stream becomes CuPy's and PyTorch's current stream, returned arrays
are checked before any copy, synchronize=True waits where it says."""

import contextlib
import sys
import types

import numpy as np
import pytest

from xlabind import _xlabind, cuda_calls

CODES = {name: code for code, name in _xlabind.element_type_names().items()}
XLA_STREAM, DEVICE = 0x7000, 3


def device_array(dtype="float32", shape=(4,), readonly=False, data=0x20000):
    return _xlabind.DeviceArray._for_testing(data, list(shape), CODES[dtype], readonly,
                                             XLA_STREAM, DEVICE)


class FakeStream:
    def __init__(self, ptr, log, device_id=-1):
        self.ptr, self.log, self.device_id = ptr, log, device_id

    def __enter__(self):
        self.log.append(("stream", self.ptr, self.device_id))

    def __exit__(self, *exc):
        self.log.append(("stream done", self.ptr))


@pytest.fixture
def fake_gpu(monkeypatch):
    """A running CUDA call on XLA_STREAM, a fake CuPy, and a record of driver calls."""
    log = []
    monkeypatch.setattr(_xlabind, "cuda_current_call", lambda: (XLA_STREAM, DEVICE))
    monkeypatch.setattr(_xlabind, "cuda_synchronize_stream", lambda s: log.append(("sync", s)))
    monkeypatch.setattr(_xlabind, "cuda_synchronize_device", lambda s: log.append(("device", s)))
    monkeypatch.setattr(_xlabind, "cuda_copy", lambda *a: log.append(("copy", *a)))
    cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(
        ExternalStream=lambda ptr, device_id: FakeStream(ptr, log, device_id),
        Device=lambda d: contextlib.nullcontext(log.append(("device", d)))))
    monkeypatch.setattr(cuda_calls, "_cupy_module", cupy)
    monkeypatch.setattr(cuda_calls, "_cupy_checked", True)
    monkeypatch.setattr(cuda_calls, "_cupy_streams", {})
    monkeypatch.setattr(cuda_calls, "_torch_streams", {})
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    return log


def test_xlas_stream_is_cupys_during_the_call(fake_gpu):
    inside = []
    result = cuda_calls.call_on_xla_stream(lambda x: inside.append(list(fake_gpu)) or x * 2,
                                           (21,), {}, synchronize=False)
    assert result == 42
    assert inside[0] == [("device", DEVICE), ("stream", XLA_STREAM, DEVICE)]
    assert fake_gpu[-1] == ("stream done", XLA_STREAM)  # and no longer after it


def test_pytorch_is_set_up_only_when_already_imported(fake_gpu, monkeypatch):
    entered = []

    class FakeTorchStream:
        def __init__(self, ptr, device):
            self.ptr = ptr

    torch = types.SimpleNamespace(
        device=lambda kind, index: (kind, index),
        cuda=types.SimpleNamespace(
            is_available=lambda: True, ExternalStream=FakeTorchStream,
            stream=lambda s: contextlib.nullcontext(entered.append(s.ptr))))
    monkeypatch.setitem(sys.modules, "torch", torch)
    cuda_calls.call_on_xla_stream(lambda: None, (), {}, synchronize=False)
    assert entered == [XLA_STREAM]


def test_synchronize_waits_for_xlas_stream_before_and_the_device_after(fake_gpu):
    cuda_calls.call_on_xla_stream(lambda: fake_gpu.append("call"), (), {}, synchronize=True)
    order = [entry for entry in fake_gpu if entry == "call" or entry[0] in ("sync", "device")
             and entry != ("device", DEVICE)]
    assert order == [("sync", XLA_STREAM), "call", ("device", XLA_STREAM)]


class Returned:
    """A device array from another library, by its CUDA array interface."""

    def __init__(self, shape=(4,), typestr="<f4", ptr=0x90000, stream=XLA_STREAM, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "version": 3, "strides": strides, "stream": stream}


def test_a_returned_array_is_copied_on_xlas_stream(fake_gpu):
    out = device_array()
    assert cuda_calls.store_result("f", 0, Returned(), out) is False
    assert fake_gpu[-1] == ("copy", 0x20000, 0x90000, 16, XLA_STREAM, None)


def test_an_array_from_another_stream_is_waited_for(fake_gpu):
    adapter = cuda_calls.returning_adapter(lambda x: Returned(stream=0x8888), "f", {}, None,
                                           False, False, lambda returned: [returned])
    adapter((device_array(readonly=True),), (device_array(),))
    copy = next(entry for entry in fake_gpu if entry[0] == "copy")
    assert copy[-1] == 0x8888  # XLA's stream waits for the producer's work
    assert fake_gpu[-1] == ("sync", XLA_STREAM)  # before the source may be freed


@pytest.mark.parametrize("value, error", [
    (None, r"f returned None for result 0; expected a device array of dtype float32 and shape "
           r"\(4,\).*in_place=True"),
    (np.zeros(4, np.float32), r"result 0 is a ndarray, not a device array"),
    (Returned(typestr="<f8"), r"result 0 has dtype float64, expected a device array of dtype "
                              r"float32"),
    (Returned(shape=(5,)), r"result 0 has shape \(5,\), expected"),
    (Returned(shape=(2, 2), strides=(4, 8)), r"is not C-contiguous"),
])
def test_returned_values_are_checked_before_any_copy(fake_gpu, value, error):
    out = device_array(shape=(2, 2) if error == r"is not C-contiguous" else (4,))
    with pytest.raises((TypeError, ValueError), match=error):
        cuda_calls.store_result("f", 0, value, out)
    assert not any(entry[0] == "copy" for entry in fake_gpu if isinstance(entry, tuple))


def test_ml_dtypes_results_travel_as_raw_bytes(fake_gpu):
    out = device_array("bfloat16")
    assert cuda_calls.store_result("f", 0, Returned(typestr="<V2"), out) is False
    assert fake_gpu[-1][:4] == ("copy", 0x20000, 0x90000, 8)
