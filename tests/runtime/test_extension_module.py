"""The compiled extension exports only its module init and the FFI handlers."""

import ctypes
import os

import pytest

import xlabind  # noqa: F401  (loads the extension)
from xlabind import _xlabind


@pytest.fixture(scope="module")
def library():
    return ctypes.CDLL(_xlabind.__file__, mode=ctypes.RTLD_LOCAL)


@pytest.mark.parametrize(
    "symbol",
    [
        "PyInit__xlabind",
        "XlabindCpuPythonCallback",
        "XlabindCpuPythonCallbackInstantiate",
        "XlabindNoop",
    ],
)
def test_exports_the_handlers(library, symbol):
    assert getattr(library, symbol) is not None


class DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def defining_file(library, symbol):
    """The file that defines `symbol` as seen from `library`, or None if none does."""
    try:
        address = ctypes.cast(getattr(library, symbol), ctypes.c_void_p)
    except AttributeError:
        return None
    info = DlInfo()
    assert ctypes.CDLL(None).dladdr(address, ctypes.byref(info))
    return os.path.realpath(info.dli_fname.decode())


@pytest.mark.parametrize(
    "symbol",
    [
        "_Znwm",  # operator new(size_t): zig links libc++ statically into the module
        "_ZdlPv",  # operator delete(void*)
        "_ZN8nanobind4abi112python_errorD2Ev",
    ],
)
def test_hides_libcxx_and_nanobind(library, symbol):
    # With a shared libstdc++ (--config=gcc) the symbol may come from there; it
    # must never come from the module itself.
    assert defining_file(library, symbol) != os.path.realpath(_xlabind.__file__)


def test_handler_capsules():
    assert set(_xlabind.registrations()["cpu"]) == {
        "xlabind_check_status",
        "xlabind_copy",
        "xlabind_noop",
    }
    callbacks = _xlabind.callback_registrations()
    for platform, name in (
        ("cpu", "xlabind_cpu_callback_state"),
        ("CUDA", "xlabind_cuda_callback_state"),
    ):
        assert callbacks[platform]["state_type"]["name"] == name
        graph = {"xlabind_python_callback_graph"} if platform == "CUDA" else set()
        assert set(callbacks[platform]["targets"]) == {
            "xlabind_python_callback",
            "xlabind_python_callback_status",
            *graph,
        }
        for stages in callbacks[platform]["targets"].values():
            assert set(stages) == {"instantiate", "execute"}
