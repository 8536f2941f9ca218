"""Switches, counters and stand-ins of xlabind's runtime for its own
benchmarks and tests, and for checks of a build (``tools/``): what no program
needs, in one module, so that nothing outside the package imports its private
modules, and a change inside the package has one file's callers to update.

Not for programs: these may change in any release. ``import xlabind`` does
not import this module.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any, cast

import jax

from xlabind._lowering import status_exchange as _status_exchange
from xlabind._runtime import extension as _extension
from xlabind._runtime import python_on_cuda as _python_on_cuda
from xlabind._runtime import python_on_tpu as _python_on_tpu
from xlabind._runtime.python_functions import PythonImplementation as _PythonImplementation

__all__ = [
    "COPY_TARGET",
    "NOOP_TARGET",
    "collect_released_callbacks",
    "cuda_host_callback",
    "element_type_code",
    "live_callback_data_count",
    "load_compiled_module",
    "registered_targets",
    "set_status_exchange",
    "set_unwritten_result_checks",
    "time_cuda_host_calls",
    "unavailable_targets",
    "use_cuda_libraries",
]

#: A native FFI target (CPU and CUDA) that does nothing: the baseline a
#: benchmark subtracts, called with ``jax.ffi.ffi_call``.
NOOP_TARGET: str = _extension.NOOP_TARGET
#: A native FFI target (CPU) that copies its one operand into its result
#: (``memcpy``): what a Python function that writes its result once is
#: measured against (docs/development/measuring.md).
COPY_TARGET: str = _extension.COPY_TARGET


def set_unwritten_result_checks(enabled: bool) -> None:
    """Whether a call checks that the Python function wrote every result it
    was given (on by default); a benchmark's no-op turns it off to time the
    call alone. Read at each call: programs compiled before it take it too."""
    _extension.set_checks_unwritten_results(enabled)
    _python_on_tpu.CHECKS_UNWRITTEN = bool(enabled)


def set_status_exchange(enabled: bool) -> None:
    """Whether calls made once per device tell the other devices whether they
    failed (on by default; ``xlabind/_lowering/status_exchange.py``). Read when a
    program is lowered: compile after setting it."""
    _status_exchange._EXCHANGE_STATUS = enabled


def collect_released_callbacks() -> None:
    """Frees now, instead of at the next call, the Python functions of bound
    functions that are gone."""
    _extension.collect_released_callbacks()


def live_callback_data_count() -> int:
    """How many bound functions' callback data (their Python functions and
    what those hold) the runtime still keeps alive."""
    return int(_extension.live_callback_data_count())


def element_type_code(name: str) -> int:
    """XLA's element type code for a dtype name ("float32")."""
    codes = {dtype: code for code, dtype in _extension.element_type_names().items()}
    if name not in codes:
        raise ValueError(
            f"xlabind.testing.element_type_code: name must be a dtype XLA knows "
            f"({', '.join(sorted(codes))}); got {name!r}"
        )
    return int(codes[name])


def registered_targets() -> dict[str, list[str]]:
    """Platform -> the FFI targets the core module registered with jax there."""
    return {platform: sorted(targets) for platform, targets in _extension.REGISTRATIONS.items()}


def unavailable_targets() -> dict[tuple[str, str], str]:
    """(platform, target) -> why the target is not registered there (its
    module was not built for that platform, or did not load)."""
    return dict(_extension.UNAVAILABLE)


def load_compiled_module(name: str) -> types.ModuleType:
    """One of the package's compiled modules ("_xlabind", "_xlabind_ops",
    "_xlabind_cuda_ops"), imported: an ImportError says why it cannot load."""
    if name not in {"_xlabind", "_xlabind_ops", "_xlabind_cuda_ops"}:
        raise ValueError(
            f"xlabind.testing.load_compiled_module: name must be one of '_xlabind', "
            f"'_xlabind_ops', '_xlabind_cuda_ops'; got {name!r}"
        )
    return importlib.import_module(f"xlabind.{name}")


def cuda_host_callback(
    style: str, fn: Callable[..., Any], capturable: bool = False, name: str = "floor"
) -> object:
    """A CUDA callback of `fn` registered with the runtime as a bound function
    registers it, for time_cuda_host_calls (registered while the returned
    object lives): `style` "in_place" (``fn(*operands, out=...)``),
    "returning" (``fn(*operands)`` returns the result) or "floor" (the
    handler's own work around a bare call of `fn`, nothing of a bound
    function's; `name` in its messages). `capturable`: bound with
    command_buffer_compatible=True."""
    if style == "floor":
        return _extension.CallbackEntry(fn, name)
    if style not in ("in_place", "returning"):
        raise ValueError(
            "xlabind.testing.cuda_host_callback: style must be 'in_place', 'returning' "
            f"or 'floor'; got {style!r}"
        )
    implementation = _PythonImplementation(
        {"cuda": fn}, in_place=style == "in_place", command_buffer_compatible=capturable
    )
    out_tree = jax.tree_util.tree_structure(0)
    make_entry: Callable[..., object] = implementation._make_entry
    return make_entry("cuda", fn, fn.__name__, {}, out_tree)


def time_cuda_host_calls(
    callback: object,
    buffers: Sequence[tuple[int, list[int], int]],
    results: int,
    calls: int,
    stream: int,
    device: int,
    foreign_thread: bool = False,
) -> float:
    """Seconds for `calls` calls of `callback` (cuda_host_callback), each made
    as the CUDA handler makes it but with no GPU: `buffers` are (address,
    shape, element type code), the last `results` of them results; `stream`
    and `device` what XLA would pass. With `foreign_thread`, from a thread
    Python did not start, as XLA's are."""
    key = callback.key  # type: ignore[attr-defined]
    return float(
        _extension.time_cuda_host_calls(
            key, list(buffers), results, calls, stream, device, foreign_thread=foreign_thread
        )
    )


def use_cuda_libraries(cupy: object | None, torch: object | None) -> Callable[[], None]:
    """Makes `cupy` and `torch` (modules or stand-ins; None: not installed)
    what CUDA callbacks see, and the driver's copy a no-op (it needs a GPU);
    returns the function that undoes it."""
    saved = (
        _python_on_cuda._cupy_module,
        _python_on_cuda._cupy_checked,
        sys.modules.get("cupy"),
        sys.modules.get("torch"),
        _extension.cuda_copy,
    )

    def install(
        cupy_module: object | None,
        checked: bool,
        cupy_entry: object | None,
        torch_entry: object | None,
        copy: Callable[..., None],
    ) -> None:
        _python_on_cuda._cupy_module, _python_on_cuda._cupy_checked = cupy_module, checked
        for name, value in (("cupy", cupy_entry), ("torch", torch_entry)):
            if value is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = cast(types.ModuleType, value)  # or a stand-in
        _python_on_cuda._streams.clear()  # made again for these libraries
        _python_on_cuda._torch_streams = None
        _extension.cuda_copy = copy

    install(cupy, True, cupy, torch, lambda *args: None)
    return lambda: install(*saved)
