"""Loads xlabind's C++ handlers and registers them with jax, once, at import.

This is the only module that touches the extension `_xlabind_cpu`; the rest of
the package uses the names and objects it exports.
"""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np

from xlabind import _xlabind_cpu

#: FFI target of the handler that calls Python on XLA's buffers.
PYTHON_CALLBACK_TARGET = "xlabind_python_callback"
#: FFI target of a native handler that does nothing (a baseline for timings).
NOOP_TARGET = "xlabind_noop"

CallbackEntry = _xlabind_cpu.CallbackEntry
live_callback_count = _xlabind_cpu.live_callback_count


def _resolve_dtype(name: str) -> np.dtype | None:
    """The NumPy dtype called `name`, from ml_dtypes if NumPy lacks it."""
    if hasattr(ml_dtypes, name):
        return np.dtype(getattr(ml_dtypes, name))
    try:
        return np.dtype(name)
    except TypeError:
        return None  # an older ml_dtypes: the type stays unsupported


def _install_dtypes() -> frozenset[np.dtype]:
    table = {}
    for code, name in _xlabind_cpu.element_type_names().items():
        dtype = _resolve_dtype(name)
        if dtype is not None:
            table[code] = dtype
    _xlabind_cpu.install_dtypes(table)
    return frozenset(table.values())


#: Every dtype the callback handler can hand to Python as a NumPy view.
SUPPORTED_DTYPES: frozenset[np.dtype] = _install_dtypes()

for _name, _capsule in _xlabind_cpu.handlers().items():
    jax.ffi.register_ffi_target(_name, _capsule, platform="cpu", api_version=1)
