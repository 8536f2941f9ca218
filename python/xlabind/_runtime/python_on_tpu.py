"""The Python half of a call on a TPU: the host function XLA's host-callback
transfers run (what `jax.pure_callback` runs there too).

A TPU program cannot hand its buffers to Python: XLA sends each operand to
the host, calls this function on the NumPy copies, and receives the results
back. The function behaves as the CPU handler's call does
(ffi/common/python_call.cc): a returning function's results are checked and
cast as on the CPU (the check python_functions.py passes in); an in-place one writes
into host arrays that become the results, which must come back filled (the
same first/last-element sentinel check, switched by
xlabind.testing.set_unwritten_result_checks), and must return None; an
exception names the function, and an interrupt (KeyboardInterrupt,
SystemExit) is raised again in the main thread, as the CPU handler does it
(ffi/common/python_errors.cc). The user's function runs with the CPU as
jax's default device, as jax's own callbacks run: jax code in it then never
waits for the chip that is waiting for it.

XLA's host transfer of int2, int4 and uint4 arrays (which it packs several
to a byte) and of float8 ones killed the process on a v5e chip.
`emit_host_call` carries every sub-byte dtype and 1-byte float across the
transfer in a whole-byte dtype NumPy knows (`wire_dtype`): converted or
bitcast in the program on each side of it, and back on the host
(`wire_function`), so that the user's function still sees its declared
dtypes.
"""

from __future__ import annotations

import _thread
import ctypes
import threading
from collections.abc import Callable, Sequence
from typing import Any

import jax
import ml_dtypes
import numpy as np
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo
from jax.interpreters import mlir

from xlabind import _jax_internals

# One byte pattern written into the first and last element of an in-place
# result before the call; a function that writes nothing leaves it there.
_SENTINEL_BYTE = 0xA7


class CallbackError(RuntimeError):
    """An exception raised by a bound Python function inside a TPU program,
    named as on the CPU: ``xlabind callback 'name' raised Type: message``.
    XLA reports it as the program's failure; the original is its cause."""


#: Whether in-place results are checked for being written (the CPU handler's
#: switch, xlabind.testing.set_unwritten_result_checks, sets both).
CHECKS_UNWRITTEN = True


def _mark(result: np.ndarray) -> bool:
    if result.size == 0:
        return False
    flat = result.reshape(-1).view(np.uint8)
    width = result.dtype.itemsize
    flat[:width] = _SENTINEL_BYTE
    flat[-width:] = _SENTINEL_BYTE
    return True


def _unwritten(result: np.ndarray) -> bool:
    flat = result.reshape(-1).view(np.uint8)
    width = result.dtype.itemsize
    return bool(np.all(flat[:width] == _SENTINEL_BYTE) and np.all(flat[-width:] == _SENTINEL_BYTE))


def _unwritten_error(name: str, index: int, count: int, jaxbind: bool) -> TypeError:
    if jaxbind:
        return TypeError(
            f"{name} wrote nothing into out[{index}] (its first and last elements are still "
            f"as xlabind left them): a jaxbind callback must fill every result, e.g. "
            f"out[{index}][...] = value"
        )
    which = "`out`" if count == 1 else f"result {index} of `out`"
    return TypeError(
        f"{name} wrote nothing into {which} (its first and last elements are still as "
        f"xlabind left them): an in_place function must fill every result it is given, since "
        f"the result memory starts uninitialised; write every element (e.g. out[...] = value), "
        f"also on the paths that skip the work"
    )


def _host_device():
    """The CPU device jax code inside the function runs on, or None (then jax's
    default) where jax was started without its CPU backend."""
    try:
        return jax.local_devices(backend="cpu")[0]
    except RuntimeError:
        return None


def _handed_back(result: Any, dtype: np.dtype) -> np.ndarray:
    """`result` as XLA's host transfer takes it: a C-contiguous array of exactly
    `dtype`. The chip's transfer reinterprets each result's bytes, which a
    strided view (a transpose, x[::2]) of a multi-byte dtype does not allow;
    np.ascontiguousarray is not used since it makes a 0-d array 1-d."""
    return np.asarray(result, dtype=dtype, order="C")


def _utf8_safe(text: str) -> str:
    """`text` with what UTF-8 cannot encode (a lone surrogate, as a failed
    decode leaves) backslash-escaped, as the CPU handler escapes it: the
    error's text is converted to UTF-8 in C++, which crashes on it."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


# An interrupt on its way to the main thread: at most one at a time, so that a
# computation that fails in several calls (a sequential vmap) raises it once.
_pending: _InterruptForMainThread | None = None
_pending_lock = threading.Lock()  # never taken by a carrier, which may run while it is held
_this_thread = threading.local()

# CPython calls a pending call as func(arg) in the main thread at its next
# bytecode boundary, and raises what it left set when it returns -1:
# PyObject_IsTrue(carrier) is such a function, and the carrier's __bool__
# raises the interrupt.
_add_pending_call = ctypes.pythonapi.Py_AddPendingCall
_add_pending_call.argtypes = [ctypes.c_void_p, ctypes.py_object]
_add_pending_call.restype = ctypes.c_int
_TRUTH_TEST = ctypes.cast(ctypes.pythonapi.PyObject_IsTrue, ctypes.c_void_p)


class _InterruptForMainThread:
    """Raises its interrupt when CPython's pending-call queue tests its truth,
    in the main thread."""

    def __init__(self, interrupt: BaseException):
        self.interrupt: BaseException | None = interrupt

    def schedule(self) -> bool:
        # The queue holds a borrowed pointer: _pending keeps the carrier alive.
        return _add_pending_call(_TRUTH_TEST, self) == 0

    def __bool__(self) -> bool:
        global _pending
        if getattr(_this_thread, "unwinding", False) and self.schedule():
            # The main thread runs the call itself (a CPU program that runs
            # inline) and is still leaving it: raised here, the interrupt
            # would become the call's error text instead of reaching the
            # caller, so it waits for the next boundary after the call.
            return False
        _pending = None
        interrupt, self.interrupt = self.interrupt, None
        assert interrupt is not None  # the queue raises each carrier's interrupt once
        raise interrupt


def _drop_tracebacks(error: BaseException) -> None:
    """Clears the traceback of `error` and of the exceptions chained to it: the
    call's frames (and the host arrays they hold) die with the call."""
    chained: BaseException | None = error
    for _ in range(64):
        if chained is None:
            return
        chained.__traceback__ = None
        chained = chained.__context__ or chained.__cause__


def _forward_interrupt(interrupt: BaseException) -> bool:
    """Schedules `interrupt` to be raised again in the main thread as soon as
    Python runs there (the way CPython delivers SIGINT itself); whether it will be."""
    global _pending
    _drop_tracebacks(interrupt)
    with _pending_lock:
        if _pending is not None:
            return True  # one is on its way already
        carrier = _InterruptForMainThread(interrupt)
        _pending = carrier
        if threading.current_thread() is threading.main_thread():
            _this_thread.unwinding = True
        if carrier.schedule():
            return True
        _pending = None
        _this_thread.unwinding = False
    # The queue is full: fall back on the SIGINT machinery for Ctrl-C.
    if isinstance(interrupt, KeyboardInterrupt):
        _thread.interrupt_main()
        return True
    return False


def _callback_error(name: str, error: BaseException) -> CallbackError:
    """The error a failed call hands XLA: the function's name and the
    exception's, in UTF-8-safe text; an interrupt is also sent on to the main
    thread, and the text says so."""
    kind = type(error).__name__
    try:
        text = f"xlabind callback '{name}' raised {kind}: {error}"
    except Exception:  # its __str__ failed too
        text = f"xlabind callback '{name}' raised {kind}: <unprintable>"
    if not isinstance(error, Exception) and _forward_interrupt(error):
        text += (
            f"\n(xlabind raises this {kind} again in the main thread once the computation "
            f"has failed, so that `except Exception:` does not swallow it)"
        )
    return CallbackError(_utf8_safe(text))


def host_function(
    fn: Callable,
    name: str,
    kwargs: dict[str, Any],
    result_avals: Sequence[Any],
    *,
    in_place: bool,
    out_builder: Callable[[tuple], Any] | None = None,
    flatten: Callable[[Any], list] | None = None,
    aliases: Sequence[tuple[int, int]] = (),
    jaxbind: bool = False,
    check: Callable[..., np.ndarray],
) -> Callable[..., tuple[np.ndarray, ...]]:
    """host(*operands) -> results: `fn` called on host copies of a TPU
    program's operands. `aliases` are (operand, result) pairs whose result
    starts as a copy of the operand (an in-place update). `check(name,
    index, value, dtype, shape)` is the CPU call's check of a returned result
    (python_functions.checked_result). Each result comes back C-contiguous,
    of exactly its declared dtype and shape."""
    shapes = [(tuple(a.shape), np.dtype(a.dtype)) for a in result_avals]
    aliased = {j: i for i, j in aliases}

    def call(operands: Sequence[np.ndarray]) -> list[np.ndarray]:
        if not in_place:
            assert flatten is not None
            values = flatten(fn(*operands, **kwargs))
            return [
                _handed_back(check(name, i, v, dtype, shape), dtype)
                for i, (v, (shape, dtype)) in enumerate(zip(values, shapes))
            ]
        results = [np.empty(shape, dtype) for shape, dtype in shapes]
        marked = []
        checks = CHECKS_UNWRITTEN
        for j, result in enumerate(results):
            if j in aliased:
                np.copyto(result, operands[aliased[j]])
            elif checks and _mark(result):
                marked.append(j)
        out = out_builder(tuple(results)) if out_builder is not None else tuple(results)
        returned = fn(*operands, out=out, **kwargs)
        if returned is not None:
            raise TypeError(
                f"{name} is an in_place function: it must write into `out` and return "
                f"None, but it returned {type(returned).__name__}"
            )
        for j in marked:
            if _unwritten(results[j]):
                raise _unwritten_error(name, j, len(results), jaxbind)
        return [_handed_back(r, dtype) for r, (_, dtype) in zip(results, shapes)]

    def host(*operands: np.ndarray) -> tuple[np.ndarray, ...]:
        try:
            arrays = tuple(np.asarray(x) for x in operands)
            with jax.default_device(_host_device()):
                return tuple(call(arrays))
        except BaseException as error:
            # Made before anything can raise a forwarded interrupt in this
            # frame; `from error` keeps the original (never turned into text).
            failure = _callback_error(name, error)
            raise failure from error
        finally:
            # The last statement before the error leaves this frame: nothing
            # after it runs a pending call in the main thread.
            _this_thread.unwinding = False

    host.__qualname__ = f"xlabind TPU host call of {name}"
    return host


# -- wire dtypes -------------------------------------------------------------

_BITCAST, _CONVERT = "bitcast", "convert"


def _wire_table() -> dict[np.dtype, tuple[np.dtype, str]]:
    table = {}
    for dtype_name, wire, how in (
        # Value-preserving conversions: every value of the narrow type is one of
        # the wide type's, and comes back exactly. (A bitcast cannot change the
        # bit width, and XLA packs these several to a byte: an odd-length int4
        # array has no whole number of bytes.)
        ("int2", np.int8, _CONVERT),
        ("int4", np.int8, _CONVERT),
        ("uint2", np.uint8, _CONVERT),
        ("uint4", np.uint8, _CONVERT),
        ("float4_e2m1fn", np.float32, _CONVERT),
        # One byte each: the bytes themselves, exact for NaNs too.
        ("float8_e3m4", np.uint8, _BITCAST),
        ("float8_e4m3", np.uint8, _BITCAST),
        ("float8_e4m3b11fnuz", np.uint8, _BITCAST),
        ("float8_e4m3fn", np.uint8, _BITCAST),
        ("float8_e4m3fnuz", np.uint8, _BITCAST),
        ("float8_e5m2", np.uint8, _BITCAST),
        ("float8_e5m2fnuz", np.uint8, _BITCAST),
        ("float8_e8m0fnu", np.uint8, _BITCAST),
    ):
        if hasattr(ml_dtypes, dtype_name):  # an older ml_dtypes lacks some
            table[np.dtype(getattr(ml_dtypes, dtype_name))] = (np.dtype(wire), how)
    return table


_WIRE = _wire_table()


def _wire_of(dtype: np.dtype) -> tuple[np.dtype, str | None]:
    """(the dtype `dtype` crosses in, how it becomes that) or (dtype, None)."""
    return _WIRE.get(dtype, (dtype, None))


def wire_dtype(dtype: Any) -> np.dtype:
    """The dtype an array of `dtype` crosses XLA's host transfer in: itself,
    or for a sub-byte type or a 1-byte float one a TPU chip transfers safely."""
    return _wire_of(np.dtype(dtype))[0]


def _wire_aval(aval: Any) -> Any:
    wire = wire_dtype(aval.dtype)
    return aval if wire == np.dtype(aval.dtype) else aval.update(dtype=wire)


def from_wire(array: np.ndarray, dtype: Any) -> np.ndarray:
    """A host array that crossed in `wire_dtype(dtype)`, as `dtype` again."""
    dtype = np.dtype(dtype)
    wire, how = _wire_of(dtype)
    array = np.asarray(array)
    if how is None or array.dtype == dtype:
        return array
    if array.dtype != wire:
        raise TypeError(f"xlabind: a {dtype} array crosses as {wire}, got {array.dtype}")
    return array.view(dtype) if how == _BITCAST else array.astype(dtype)


def to_wire(array: np.ndarray, dtype: Any) -> np.ndarray:
    """A host array of `dtype` as XLA's host transfer takes it: C-contiguous,
    in `wire_dtype(dtype)`."""
    dtype = np.dtype(dtype)
    wire, how = _wire_of(dtype)
    array = _handed_back(array, dtype)
    if how is None:
        return array
    return array.view(wire) if how == _BITCAST else array.astype(wire)


def wire_function(
    host: Callable[..., tuple[np.ndarray, ...]],
    operand_avals: Sequence[Any],
    result_avals: Sequence[Any],
) -> Callable[..., tuple[np.ndarray, ...]]:
    """`host` (host_function's) for operands and results that cross in their
    wire dtypes: each operand is given to it in its declared dtype again, and
    each result handed back in its wire dtype."""
    operand_dtypes = [np.dtype(a.dtype) for a in operand_avals]
    result_dtypes = [np.dtype(a.dtype) for a in result_avals]

    def wired(*operands: np.ndarray) -> tuple[np.ndarray, ...]:
        arrays = [from_wire(x, d) for x, d in zip(operands, operand_dtypes)]
        results = host(*arrays)
        return tuple(to_wire(r, d) for r, d in zip(results, result_dtypes))

    wired.__qualname__ = getattr(host, "__qualname__", "xlabind TPU host call")
    return wired


def _converted_in_program(value: Any, dtype: np.dtype, how: str) -> Any:
    """`value` as `dtype` (same shape), in the program being lowered."""
    ir_type = ir.RankedTensorType.get(
        ir.RankedTensorType(value.type).shape, mlir.dtype_to_ir_type(dtype)
    )
    return (stablehlo.bitcast_convert if how == _BITCAST else stablehlo.convert)(ir_type, value)


def _to_wire_in_program(value: Any, aval: Any) -> Any:
    """`value` (of `aval`) in its wire dtype, in the program being lowered."""
    wire, how = _wire_of(np.dtype(aval.dtype))
    return value if how is None else _converted_in_program(value, wire, how)


def _from_wire_in_program(value: Any, aval: Any) -> Any:
    """`value` (`aval` in its wire dtype) as `aval` again, in the program being lowered."""
    dtype = np.dtype(aval.dtype)
    how = _wire_of(dtype)[1]
    return value if how is None else _converted_in_program(value, dtype, how)


def emit_host_call(ctx, host, token, operands, *, has_side_effect: bool, name: str):
    """(results, token out): _jax_internals.emit_host_callback of `host` (a
    host_function), with each operand and result of a dtype the chip's host
    transfer cannot carry crossing in its wire dtype (`wire_dtype`): converted
    in the program before the send and after the receive, and back on the
    host around `host` (`wire_function`)."""
    avals_in, avals_out = list(ctx.avals_in), list(ctx.avals_out)
    wire_in = [_wire_aval(a) for a in avals_in]
    wire_out = [_wire_aval(a) for a in avals_out]
    if all(w is a for w, a in zip(wire_in + wire_out, avals_in + avals_out)):
        return _jax_internals.emit_host_callback(
            ctx, host, token, operands, has_side_effect=has_side_effect, name=name
        )
    operands = [_to_wire_in_program(v, a) for v, a in zip(operands, avals_in)]
    results, token = _jax_internals.emit_host_callback(
        ctx.replace(avals_in=wire_in, avals_out=wire_out),
        wire_function(host, avals_in, avals_out),
        token,
        operands,
        has_side_effect=has_side_effect,
        name=name,
    )
    return [_from_wire_in_program(v, a) for v, a in zip(results, avals_out)], token
