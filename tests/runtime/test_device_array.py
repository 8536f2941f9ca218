"""The device arrays CUDA callbacks receive speak the CUDA array interface
(version 3) and DLPack correctly; checked here on made-up addresses, which
nothing dereferences."""

import ctypes
import sys

import ml_dtypes
import numpy as np
import pytest

import xlabind.cuda
from xlabind import _xlabind

CODES = {name: code for code, name in _xlabind.element_type_names().items()}
DeviceArray = xlabind.cuda.DeviceArray


def array(dtype="float32", shape=(2, 3), readonly=True, stream=0x5000, device=1, data=0x10000):
    return DeviceArray._for_testing(data, list(shape), CODES[dtype], readonly, stream, device)


@pytest.mark.parametrize(
    "dtype, typestr",
    [
        ("bool", "|b1"),
        ("int8", "|i1"),
        ("uint8", "|u1"),
        ("int16", "<i2"),
        ("int32", "<i4"),
        ("int64", "<i8"),
        ("uint64", "<u8"),
        ("float16", "<f2"),
        ("float32", "<f4"),
        ("float64", "<f8"),
        ("complex64", "<c8"),
        ("complex128", "<c16"),
        ("bfloat16", "<V2"),
        ("float8_e4m3fn", "|V1"),
    ],
)
def test_cuda_array_interface(dtype, typestr):
    a = array(dtype, readonly=False)
    interface = a.__cuda_array_interface__
    assert interface == {
        "shape": (2, 3),
        "typestr": typestr,
        "data": (0x10000, False),
        "version": 3,
        "strides": None,
        "stream": 0x5000,
    }
    assert a.dtype == np.dtype(getattr(ml_dtypes, dtype, dtype))
    assert a.nbytes == 6 * a.dtype.itemsize and a.size == 6 and a.ndim == 2 and len(a) == 2


def test_operands_are_read_only_and_carry_stream_and_device():
    a = array(readonly=True)
    assert a.__cuda_array_interface__["data"] == (0x10000, True)
    assert (a.readonly, a.stream, a.device, a.ptr) == (True, 0x5000, 1, 0x10000)
    assert a.__dlpack_device__() == (2, 1)  # kDLCUDA, device 1
    assert repr(a) == "xlabind.DeviceArray(shape=(2, 3), dtype=float32, device=cuda:1, read-only)"


def test_empty_arrays_have_a_null_pointer():
    assert array(shape=(0, 3)).__cuda_array_interface__["data"] == (0, True)


class Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("code", ctypes.c_uint8),
        ("bits", ctypes.c_uint8),
        ("lanes", ctypes.c_uint16),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.c_void_p),
        ("byte_offset", ctypes.c_uint64),
    ]


class Versioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", Tensor),
    ]


def capsule_pointer(capsule, name):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get(capsule, name)


@pytest.mark.parametrize("readonly", [True, False])
def test_dlpack_versioned_capsule(readonly):
    a = array("complex64", shape=(4, 5), readonly=readonly)
    capsule = a.__dlpack__(stream=-1, max_version=(1, 1))  # -1: no stream synchronisation
    managed = Versioned.from_address(capsule_pointer(capsule, b"dltensor_versioned"))
    assert (managed.major, managed.minor) == (1, 1)
    assert managed.flags == (1 if readonly else 0)  # DLPACK_FLAG_BITMASK_READ_ONLY
    t = managed.dl_tensor
    assert (t.data, t.device_type, t.device_id, t.ndim) == (0x10000, 2, 1, 2)
    assert (t.code, t.bits, t.lanes) == (5, 64, 1)  # kDLComplex, 64 bits
    assert [t.shape[i] for i in range(2)] == [4, 5] and not t.strides and t.byte_offset == 0


def test_dlpack_legacy_capsule():
    capsule = array("bfloat16").__dlpack__(stream=-1)
    t = Tensor.from_address(capsule_pointer(capsule, b"dltensor"))
    assert (t.code, t.bits) == (4, 16)  # kDLBfloat


def test_a_capsule_keeps_its_array_until_it_is_dropped():
    a = array()
    before = sys.getrefcount(a)
    capsule = a.__dlpack__(stream=-1)
    assert sys.getrefcount(a) == before + 1  # a consumer still holding it counts as a kept view
    del capsule
    assert sys.getrefcount(a) == before


def test_dlpack_refuses_copies_and_other_devices():
    a = array()
    with pytest.raises(BufferError, match=r"cannot copy"):
        a.__dlpack__(stream=-1, copy=True)
    with pytest.raises(BufferError, match=r"cannot move them"):
        a.__dlpack__(stream=-1, dl_device=(1, 0))


def test_synchronising_needs_the_cuda_driver():
    # Asking for a consumer stream orders it after XLA's stream: a driver call.
    try:
        ctypes.CDLL("libcuda.so.1")
        pytest.skip("this machine has a CUDA driver; tests/gpu/test_gpu.py covers it")
    except OSError:
        pass
    with pytest.raises(BufferError, match=r"CUDA driver \(libcuda.so.1\) is not installed"):
        array().__dlpack__(stream=7)


def test_a_released_array_refuses_every_use():
    a = array()
    a._release()
    for use in (
        lambda: a.__cuda_array_interface__,
        lambda: a.__dlpack__(stream=-1),
        lambda: a.__dlpack_device__(),
        lambda: a.ptr,
    ):
        with pytest.raises(BufferError, match=r"kept past the call it was handed to"):
            use()
    assert repr(a).endswith("released)")


def test_packed_types_have_no_device_form():
    with pytest.raises(TypeError, match=r"no device-array form"):
        _ = array("int4").__cuda_array_interface__


def test_the_stream_is_only_defined_inside_a_cuda_callback():
    with pytest.raises(RuntimeError, match=r"only defined inside a CUDA callback"):
        xlabind.cuda.current_stream()
    with pytest.raises(RuntimeError):
        xlabind.cuda.current_device()
