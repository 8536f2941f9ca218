"""Loads xlabind's C++ extensions and registers their FFI handlers with jax, once.

This is the only module that touches the extensions; the rest of the package
uses the names and objects it exports. Each extension hands out one table,
``{platform: {target name: handler}}``, and every entry is registered for its
platform here (registering a CUDA handler works on a CPU-only jaxlib, so CUDA
lowering can be checked anywhere):

* `_xlabind`: the Python-callback handlers (CPU and CUDA), the registry, the
  status check of sharded programs. The Python-callback handlers keep their
  callable alive with an instantiate stage whose state type must be
  registered first, and jax can register such a pair only once the
  platform's backend exists, so they are registered when xlabind first
  lowers a call for that platform (:func:`register_callback_handlers`);
* `_xlabind_ops`: xlabind's native CPU ops;
* `_xlabind_cuda_ops`: xlabind's native CUDA ops. It links the CUDA runtime
  (libcudart.so.13, from the wheel's cuda13 extra); without one it is not
  loaded, and those targets say why when a program needs them.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Mapping

import jax
import ml_dtypes
import numpy as np

from xlabind._platforms import REGISTRY_NAMES, platform_name

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
#: The same with one more result, the call's status (call_status.py).
PYTHON_CALLBACK_STATUS_TARGET = "xlabind_python_callback_status"
#: FFI target that fails every device when any call's status is a failure.
CHECK_STATUS_TARGET = "xlabind_check_status"
#: What a native target's status-reporting variant is called (+ the target's name).
STATUS_TARGET_SUFFIX = ".xlabind_status"
#: FFI target of a native handler that does nothing (a baseline for timings).
NOOP_TARGET = "xlabind_noop"
#: The size in bytes of a call's status (ffi/native/call_status.h).
STATUS_BYTES: int = _xlabind.status_bytes()

CallbackEntry = _xlabind.CallbackEntry
live_callback_count = _xlabind.live_callback_count
live_callback_data_count = _xlabind.live_callback_data_count
collect_released_callbacks = _xlabind.collect_released_callbacks


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


#: (platform as jax names it, target name) of every registered target that has
#: a status-reporting variant (name + STATUS_TARGET_SUFFIX).
STATUS_VARIANTS: set[tuple[str, str]] = set()


def register_ffi_targets(registrations: Mapping[str, Mapping[str, Any]]) -> None:
    """Registers ``{platform: {target name: handler capsule}}`` with jax (typed
    FFI, api_version=1): what an ``xlabind_extension`` module's
    ``registrations()`` returns, xlabind's own modules included. Platforms are
    ``"cpu"`` and ``"cuda"`` in any case; another is a ValueError."""
    for given, targets in registrations.items():
        platform = REGISTRY_NAMES[platform_name("xlabind.register_ffi_targets", given)]
        for name, capsule in targets.items():
            jax.ffi.register_ffi_target(name, capsule, platform=platform, api_version=1)
            if name.endswith(STATUS_TARGET_SUFFIX):
                STATUS_VARIANTS.add((_lowering_platform(platform),
                                     name[:-len(STATUS_TARGET_SUFFIX)]))


def _lowering_platform(platform: str) -> str:
    """The platform as lowering rules see it ("CUDA" -> "cuda")."""
    return platform.lower()


#: {platform: {target name: handler capsule}} of the stateless handlers.
REGISTRATIONS: dict[str, dict[str, object]] = _xlabind.registrations()
register_ffi_targets(REGISTRATIONS)

_CALLBACK_REGISTRATIONS: dict[str, dict[str, Any]] = _xlabind.callback_registrations()
_callbacks_registered: set[str] = set()
_callbacks_lock = threading.Lock()


def register_callback_handlers(platform: str) -> None:
    """Registers the Python-callback handlers (and their state type) for
    `platform` ("cpu" or "cuda"), once; called when a call is lowered for it."""
    if platform in _callbacks_registered:
        return
    with _callbacks_lock:
        if platform in _callbacks_registered:
            return
        for jax_platform, table in _CALLBACK_REGISTRATIONS.items():
            if _lowering_platform(jax_platform) != platform:
                continue
            state = table["state_type"]
            jax.ffi.register_ffi_type(state["name"], {"type_id": state["type_id"],
                                                      "type_info": state["type_info"]},
                                      platform=jax_platform)
            for name, stages in table["targets"].items():
                jax.ffi.register_ffi_target(name, stages, platform=jax_platform, api_version=1)
        _callbacks_registered.add(platform)

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
