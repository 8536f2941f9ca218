"""Loads xlabind's core C++ extension, `_xlabind`, and registers FFI handlers
with jax: its own, and any extension module's (:func:`register_ffi_targets`).

This is the only module that touches `_xlabind`; the rest of the package
uses the names and objects it exports. An extension hands out one table,
``{platform: {target name: handler}}``, and every entry is registered for its
platform here (registering a CUDA handler works on a CPU-only jaxlib, so CUDA
lowering can be checked anywhere). `_xlabind` holds the Python-callback
handlers (CPU and CUDA), the registry, the status check of sharded programs.
The Python-callback handlers keep their callable alive with an instantiate
stage whose state type must be registered first, and jax can register such a
pair only once the platform's backend exists, so they are registered when
xlabind first lowers a call for that platform
(:func:`register_callback_handlers`).

xlabind's native ops load and register their own modules, as any client's
ops do (xlabind/ops/_native.py); this module knows nothing of them.

At interpreter exit it closes the handlers' calls (:func:`_close_calls_at_exit`).
"""

from __future__ import annotations

import atexit
import contextlib
import sys
import threading
from collections.abc import Iterable, Mapping
from typing import Any, cast

import jax
import ml_dtypes
import numpy as np
from jax.extend import backend as jax_backend

from xlabind import _jax_internals
from xlabind._platforms import REGISTRY_NAMES, platform_name
from xlabind._primitive import primitive as _primitive

try:
    import xlabind._xlabind as _xlabind
except ImportError as error:
    # A module built for another CPython misses that CPython's symbols.
    raise ImportError(
        f"xlabind's compiled module did not load ({error}). If that names an undefined "
        f"Py* symbol, it was built for another Python than this one "
        f"({sys.version.split()[0]}): install the wheel built for cp{sys.version_info.major}"
        f"{sys.version_info.minor}, or build one with XLABIND_PYTHON={sys.executable} "
        f"tools/bazel run //tools:build_wheel -- --out $PWD/dist (docs/development/wheels.md)."
    ) from error

#: FFI target of the handler that calls Python on XLA's buffers (every platform).
PYTHON_CALLBACK_TARGET = "xlabind_python_callback"
#: The same with one more result, the call's status (_lowering/status_exchange.py).
PYTHON_CALLBACK_STATUS_TARGET = "xlabind_python_callback_status"
#: CUDA only: the same call with the command-buffer trait (XLA may capture it
#: into a CUDA graph), for in-place functions declared command_buffer_compatible.
PYTHON_CALLBACK_GRAPH_TARGET = "xlabind_python_callback_graph"
#: FFI target that fails every device when any call's status is a failure.
CHECK_STATUS_TARGET = "xlabind_check_status"
#: What a native target's status-reporting variant is called (+ the target's name).
STATUS_TARGET_SUFFIX = ".xlabind_status"
#: FFI target of a native handler that does nothing (a baseline for timings).
NOOP_TARGET = "xlabind_noop"
#: FFI target of a native CPU handler that copies its operand into its result.
COPY_TARGET = "xlabind_copy"
#: The size in bytes of a call's status (xlabind/native/call_status.h), which the
#: primitive declares without loading this module.
STATUS_BYTES: int = _primitive.STATUS_BYTES
if _xlabind.status_bytes() != STATUS_BYTES:  # pragma: no cover - a build mismatch
    raise ImportError(
        f"xlabind: the compiled module's status is {_xlabind.status_bytes()} "
        f"bytes, the Python side's {STATUS_BYTES}: rebuild both from one checkout"
    )

CallbackEntry = _xlabind.CallbackEntry
element_type_names = _xlabind.element_type_names
# A CUDA callback's host work without a GPU (xlabind.testing, for the benchmark).
time_cuda_host_calls = _xlabind._time_cuda_host_calls
live_callback_count = _xlabind.live_callback_count
live_callback_data_count = _xlabind.live_callback_data_count
collect_released_callbacks = _xlabind.collect_released_callbacks

# What the CUDA side needs of the module (xlabind.cuda, python_on_cuda.py): the
# device arrays callbacks receive, DLPack sources, the running call's stream,
# and the few driver calls.
DeviceArray = _xlabind.DeviceArray
DlpackSource = _xlabind.DlpackSource
cuda_current_call = _xlabind.cuda_current_call
cuda_call_is_capturing = _xlabind.cuda_call_is_capturing
cuda_copy = _xlabind.cuda_copy
cuda_set_stream_probe = _xlabind.cuda_set_stream_probe
cuda_synchronize_stream = _xlabind.cuda_synchronize_stream
cuda_synchronize_device = _xlabind.cuda_synchronize_device
#: Whether in-place results are checked to be written (tools/benchmarks only).
set_checks_unwritten_results = _xlabind.set_checks_unwritten_results


def _resolve_dtype(name: str) -> np.dtype | None:
    """The NumPy dtype called `name`, from ml_dtypes if NumPy lacks it."""
    if hasattr(ml_dtypes, name):
        resolved: np.dtype[Any] = np.dtype(getattr(ml_dtypes, name))
        return resolved
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


def register_ffi_targets(
    registrations: Mapping[str, Mapping[str, Any]] | Any,
    state_types: Mapping[str, Mapping[str, Any]] | None = None,
) -> None:
    """Registers an extension module's FFI handlers with jax (typed FFI,
    api_version=1).

    ``registrations`` is an ``xlabind_extension`` module itself (the usual
    way: its targets, their state types, and the variants of its CPU targets
    that report errors as a status, which make a sharded program stop every
    device when one fails), or a dict ``{platform: {target name: handler}}``
    as a module's ``registrations()`` returns (a handler is a capsule, or
    ``{stage: capsule}`` for a target with an instantiate stage).
    ``state_types``, ``{platform: {type name: {"type_id": ...,
    "type_info": ...}}}``, are the per-executable state types of the
    handlers' instantiate stages (xlabind/native/state.h): XLA must know a type
    before a handler that builds it is registered, which jax cannot promise
    before its backends start (it then registers handlers first). So targets
    with an instantiate stage, and their types, wait until then: until
    xlabind first lowers a call, or a later ``register_ffi_targets`` call
    finds the backends started. Targets bound with :func:`xlabind.ffi_target`
    need nothing more; to lower one with ``jax.ffi`` alone, register after
    ``jax.devices()``. Platforms are ``"cpu"`` and ``"cuda"`` in any case;
    another is a ValueError.

    Example:
      >>> import importlib, xlabind
      >>> # xlabind's own ops; yours: `import my_ops` (your xlabind_extension's name)
      >>> my_ops = importlib.import_module("xlabind._xlabind_ops")
      >>> xlabind.register_ffi_targets(my_ops)  # registering twice is harmless
      >>> sorted(my_ops.registrations()["cpu"])[:2]
      ['xlabind_map_coordinates', 'xlabind_map_coordinates_transpose']
    """
    if not isinstance(registrations, Mapping) and hasattr(registrations, "registrations"):
        module = registrations
        registrations = module.registrations()
        if hasattr(module, "status_registrations"):
            # The variants that report errors as a status: sharded programs
            # then stop every device when one fails (status_exchange.py).
            registrations = _merged(registrations, module.status_registrations())
        if state_types is None and hasattr(module, "state_types"):
            state_types = module.state_types()
    _register_pending_if_ready()
    for given in (*registrations, *(state_types or {})):
        if platform_name("xlabind.register_ffi_targets", given) not in REGISTRY_NAMES:
            raise ValueError(
                f"xlabind.register_ffi_targets: platform {given!r} runs no native FFI "
                f"handlers (XLA has no registry of user handlers on TPUs); register "
                f"handlers for 'cpu' or 'cuda'"
            )
    typed = {
        REGISTRY_NAMES[platform_name("xlabind.register_ffi_targets", p)]: dict(t)
        for p, t in (state_types or {}).items()
    }
    for given, targets in registrations.items():
        platform = REGISTRY_NAMES[platform_name("xlabind.register_ffi_targets", given)]
        stateful = {
            name: handler
            for name, handler in targets.items()
            if isinstance(handler, Mapping) and "instantiate" in handler
        }
        for name, handler in targets.items():
            if name not in stateful:
                _register_target(platform, name, handler)
        types = typed.pop(platform, {})
        if types or stateful:
            _register_typed(platform, types, stateful)
    for platform, types in typed.items():  # types without targets
        _register_typed(platform, types, {})


def _merged(
    first: Mapping[str, Mapping[str, Any]], second: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """{platform: {target: handler}} of both."""
    merged = {platform: dict(targets) for platform, targets in first.items()}
    for platform, targets in second.items():
        merged.setdefault(platform, {}).update(targets)
    return merged


def _register_target(platform: str, name: str, handler: Any) -> None:
    jax.ffi.register_ffi_target(name, handler, platform=platform, api_version=1)
    if name.endswith(STATUS_TARGET_SUFFIX):
        STATUS_VARIANTS.add((_lowering_platform(platform), name[: -len(STATUS_TARGET_SUFFIX)]))


#: {platform as lowering names it: [(state types, targets)]} waiting for the
#: platform's backend (register_ffi_targets).
_PENDING: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}


def _register_typed(platform: str, types: dict[str, Any], targets: dict[str, Any]) -> None:
    """Registers state types, then the targets that build them: now if the
    platform's registry exists (CPU always does), else when xlabind first
    lowers for the platform (register_callback_handlers)."""
    lowering = _lowering_platform(platform)
    with _callbacks_lock:
        if lowering not in _callbacks_registered and not _type_registry_exists(platform):
            _PENDING.setdefault(lowering, []).append((types, targets))
            return
    _register_types_then_targets(platform, types, targets)


def _register_types_then_targets(
    platform: str, types: dict[str, Any], targets: dict[str, Any]
) -> None:
    for type_name, type_registration in types.items():
        # jax types it as its TypeRegistration (a TypedDict); the module hands out a dict.
        registration = cast(Any, dict(type_registration))
        jax.ffi.register_ffi_type(type_name, registration, platform=platform)
    for name, handler in targets.items():
        _register_target(platform, name, handler)


def _register_pending_if_ready() -> None:
    """Registers what waited for jax's backends, once they have started (so a
    later register_ffi_targets call, or a first lowering, lets it through)."""
    if not _PENDING or not _jax_internals.backends_are_initialized():
        return
    with _callbacks_lock:
        waiting = [(platform, entry) for platform, entries in _PENDING.items() for entry in entries]
        _PENDING.clear()
    for platform, (types, targets) in waiting:
        _register_types_then_targets(REGISTRY_NAMES[platform], types, targets)


def _type_registry_exists(platform: str) -> bool:
    """Whether registering now puts a type before its handlers: before jax
    starts its backends it queues handlers and types alike and registers the
    handlers first, which XLA refuses for a handler whose state type is not
    registered yet (the whole backend then fails to start)."""
    del platform  # the same for every platform
    return _jax_internals.backends_are_initialized()


def handler_metadata(capsule: Any) -> dict[str, Any]:
    """``{"api_version": (major, minor), "traits": int}``: what XLA reads from
    a handler when it registers it (traits: 1 = command-buffer compatible); a
    RuntimeError when the handler refuses (an instantiate stage before its
    state type is registered)."""
    return cast(dict[str, Any], _xlabind.handler_metadata(capsule))


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
    `platform` ("cpu" or "cuda"), once, and any stateful targets that waited
    for it (register_ffi_targets); called when a call is lowered for it."""
    _register_pending_if_ready()
    if platform in _callbacks_registered:
        return
    with _callbacks_lock:
        if platform in _callbacks_registered:
            return
        for jax_platform, table in _CALLBACK_REGISTRATIONS.items():
            if _lowering_platform(jax_platform) != platform:
                continue
            state = table["state_type"]
            _register_types_then_targets(
                jax_platform,
                {state["name"]: {"type_id": state["type_id"], "type_info": state["type_info"]}},
                table["targets"],
            )
        for types, targets in _PENDING.pop(platform, []):
            _register_types_then_targets(REGISTRY_NAMES[platform], types, targets)
        _callbacks_registered.add(platform)


#: {(platform, target name): why it is not available here}
UNAVAILABLE: dict[tuple[str, str], str] = {}


def mark_unavailable(platform: str, names: Iterable[str], reason: str) -> None:
    """Records that the targets `names` have no handler on `platform`, and
    why: a bound function's lowering for that platform raises with `reason`
    (an extension module that did not load, say) instead of jax's "no
    handler registered"."""
    for name in names:
        UNAVAILABLE[(platform, name)] = reason


#: How long interpreter exit waits for the callbacks still running Python.
EXIT_WAIT_SECONDS = 30.0
#: How long interpreter exit waits for a daemon thread that calls functions
#: inline to reach its next call.
DAEMON_WAIT_SECONDS = 1.0


def _close_calls_at_exit() -> None:
    """Lets no callback run Python once the interpreter finalizes (CPython
    ends a thread that takes the GIL then, which crashes the process in the
    handler's frames and in jaxlib's: ffi/common/python_call.h, "Exit").
    Waits for the ordered effects in flight (their calls must run), then stops
    admitting calls from other threads and waits for those running, up to
    EXIT_WAIT_SECONDS. Runs before jax's own atexit functions (registered
    earlier), while the interpreter is whole."""
    backends_started = _jax_internals.backends_are_initialized()
    if backends_started:
        # A failed effect is jax's own atexit function's to report.
        with contextlib.suppress(Exception):
            jax.effects_barrier()  # type: ignore[no-untyped-call]
    # threading has joined every thread but the daemon ones: one that lives
    # may wait for a computation, which must then never complete. Held calls
    # keep jax's clients alive (a client's destructor waits for its threads),
    # which jax's check for leaked clients, when on, would fail.
    daemon_threads = [
        thread.ident
        for thread in threading.enumerate()
        if thread is not threading.current_thread() and thread.ident is not None
    ]
    hold_calls = bool(daemon_threads) and not _checks_leaked_clients()
    still_running = _xlabind.close_calls(EXIT_WAIT_SECONDS, hold_calls)
    if hold_calls:
        # One that calls functions inline is likely between two calls, in
        # jaxlib: its next call holds it there.
        _xlabind.wait_for_held_threads(daemon_threads, DAEMON_WAIT_SECONDS)
        if backends_started:
            for client in jax_backend.backends().values():
                _xlabind.keep_until_exit(client)
    if still_running:
        print(
            f"xlabind: {still_running} callback(s) still running Python "
            f"{EXIT_WAIT_SECONDS:g} s after the program ended; the process may crash "
            f"when Python finalizes. Wait for your computations (block_until_ready) "
            f"before exiting.",
            file=sys.stderr,
        )


def _checks_leaked_clients() -> bool:
    """Whether jax, at exit, fails the process when a client outlives
    clear_backends (a debugging option)."""
    return bool(getattr(jax.config, "jax_debug_leaked_clients_on_clear_backends", False))


# atexit runs the last registered first. _xlabind.stop_forwarding_interrupts,
# a C function, runs before any Python code of the atexit functions could
# raise an interrupt a callback forwarded (it would be printed as ignored: the
# main thread has ended).
atexit.register(_close_calls_at_exit)
atexit.register(_xlabind.stop_forwarding_interrupts)
