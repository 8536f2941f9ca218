"""Loads xlabind's C++ extensions and registers their FFI handlers with jax, once.

This is the only module that touches the extensions; the rest of the package
uses the names and objects it exports. Each extension hands out one table,
``{platform: {target name: handler}}``, and every entry is registered for its
platform here (registering a CUDA handler works on a CPU-only jaxlib, so CUDA
lowering can be checked anywhere):

* `_xlabind`: the Python-callback handlers (CPU and CUDA), the registry;
* `_xlabind_ops`: xlabind's native CPU ops;
* `_xlabind_cuda_ops`: xlabind's native CUDA ops. It links the CUDA runtime
  (libcudart.so.13, from the wheel's cuda13 extra); without one it is not
  loaded, and those targets say why when a program needs them.
"""

from __future__ import annotations

import sys
from typing import Any, Mapping

import jax
import ml_dtypes
import numpy as np

try:
    from xlabind import _xlabind
except ImportError as error:
    # A module built for another CPython misses that CPython's symbols.
    raise ImportError(
        f"xlabind's compiled module did not load ({error}). If that names an undefined "
        f"Py* symbol, it was built for another Python than this one "
        f"({sys.version.split()[0]}): install the wheel built for cp{sys.version_info.major}"
        f"{sys.version_info.minor}, or build one with XLABIND_PYTHON={sys.executable} "
        f"tools/bazel run //tools:build_wheel -- --out $PWD/dist (README: Install).") from error

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


def register_ffi_targets(registrations: Mapping[str, Mapping[str, Any]]) -> None:
    """Registers ``{platform: {target name: handler capsule}}`` with jax (typed
    FFI, api_version=1): what an ``xlabind_extension`` module's
    ``registrations()`` returns, xlabind's own modules included."""
    for platform, targets in registrations.items():
        for name, capsule in targets.items():
            jax.ffi.register_ffi_target(name, capsule, platform=platform, api_version=1)


#: {platform: {target name: handler capsule}} of the Python-callback handlers.
REGISTRATIONS: dict[str, dict[str, object]] = _xlabind.registrations()
register_ffi_targets(REGISTRATIONS)

from xlabind import _xlabind_ops  # noqa: E402  (needs nothing but the C++ runtime)

_CPU_OPS = _xlabind_ops.registrations()
register_ffi_targets(_CPU_OPS)

#: {(platform, target name): why it is not available here}
UNAVAILABLE: dict[tuple[str, str], str] = {}
try:
    from xlabind import _xlabind_cuda_ops
except ImportError as error:
    # The CUDA module holds the CUDA versions of the CPU module's ops.
    for _name in _CPU_OPS["cpu"]:
        UNAVAILABLE[("cuda", _name)] = (
            f"xlabind's CUDA kernels need the CUDA 13 runtime (libcudart.so.13), which did not "
            f"load ({error}). Install it with `pip install xlabind[cuda13]`.")
else:
    register_ffi_targets(_xlabind_cuda_ops.registrations())
