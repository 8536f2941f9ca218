"""The compiled extension exports only its module init and the FFI handlers."""

import ctypes

import pytest

import xlabind  # noqa: F401  (loads the extension)
from xlabind import _xlabind_cpu


@pytest.fixture(scope="module")
def library():
    return ctypes.CDLL(_xlabind_cpu.__file__, mode=ctypes.RTLD_LOCAL)


@pytest.mark.parametrize("symbol", ["PyInit__xlabind_cpu", "XlabindPythonCallback", "XlabindNoop"])
def test_exports_the_handlers(library, symbol):
    assert getattr(library, symbol) is not None


@pytest.mark.parametrize("symbol", [
    "_Znwm",      # operator new(size_t), from the static libc++
    "_ZdlPv",     # operator delete(void*)
    "_ZN8nanobind4abi112python_errorD2Ev",
])
def test_hides_libcxx_and_nanobind(library, symbol):
    with pytest.raises(AttributeError):
        getattr(library, symbol)


def test_handler_capsules():
    assert set(_xlabind_cpu.handlers()) == {"xlabind_python_callback", "xlabind_noop"}
