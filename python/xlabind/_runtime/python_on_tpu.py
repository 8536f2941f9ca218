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
exception names the function. The user's function runs with the CPU as
jax's default device, as jax's own callbacks run: jax code in it then never
waits for the chip that is waiting for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

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
    (python_functions.checked_result)."""
    shapes = [(tuple(a.shape), np.dtype(a.dtype)) for a in result_avals]
    aliased = {j: i for i, j in aliases}

    def call(operands: Sequence[np.ndarray]) -> list[np.ndarray]:
        if not in_place:
            assert flatten is not None
            values = flatten(fn(*operands, **kwargs))
            return [
                np.asarray(check(name, i, v, dtype, shape), dtype)
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
        return results

    def host(*operands: np.ndarray) -> tuple[np.ndarray, ...]:
        operands = tuple(np.asarray(x) for x in operands)
        try:
            with jax.default_device(_host_device()):
                return tuple(call(operands))
        except Exception as error:
            raise CallbackError(
                f"xlabind callback '{name}' raised {type(error).__name__}: {error}"
            ) from error

    host.__qualname__ = f"xlabind TPU host call of {name}"
    return host
