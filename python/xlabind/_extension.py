"""Loads xlabind's C++ extension and registers its FFI handlers with jax, once.

This is the only module that touches the extension `_xlabind`; the rest of the
package uses the names and objects it exports. The extension hands out one
table, ``{platform: {target name: handler}}``, and every entry is registered
for its platform here (registering a CUDA handler works on a CPU-only jaxlib,
so CUDA lowering can be checked anywhere).
"""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np

from xlabind import _xlabind

#: FFI target of the handler that calls Python on XLA's buffers (every platform).
PYTHON_CALLBACK_TARGET = "xlabind_python_callback"
#: FFI target of a native handler that does nothing (a baseline for timings).
NOOP_TARGET = "xlabind_noop"

CallbackEntry = _xlabind.CallbackEntry
live_callback_count = _xlabind.live_callback_count


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
    for code, name in _xlabind.element_type_names().items():
        dtype = _resolve_dtype(name)
        if dtype is not None:
            table[code] = dtype
    _xlabind.install_dtypes(table)
    return frozenset(table.values())


#: Every dtype the CPU handler can hand to Python as a NumPy view.
SUPPORTED_DTYPES: frozenset[np.dtype] = _install_dtypes()

#: {platform: {target name: handler capsule}}, as registered with jax.
REGISTRATIONS: dict[str, dict[str, object]] = _xlabind.registrations()

for _platform, _targets in REGISTRATIONS.items():
    for _name, _capsule in _targets.items():
        jax.ffi.register_ffi_target(_name, _capsule, platform=_platform, api_version=1)
