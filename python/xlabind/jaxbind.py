"""A drop-in replacement for jaxbind 1.3.1: change ``import jaxbind`` to
``from xlabind import jaxbind`` and keep everything else.

Same entry points, signatures and callback conventions:

* ``get_linear_call(f, f_T, /, abstract, abstract_T, *, first_n_args_fixed=0,
  func_can_batch=False)``: a linear function; a tuple of transposes makes it
  multilinear (one transpose per argument, ``None`` for fixed ones).
* ``get_nonlinear_call(f, f_derivative, /, abstract, abstract_reverse, *,
  first_n_args_fixed=0, func_can_batch=False)`` with ``f_derivative = (jvp, vjp)``.
* Callbacks are ``cb(out, args, kwargs_dump)``: ``out`` a list of writable
  result arrays, ``args`` the operands (read-only), ``load_kwargs(kwargs_dump)``
  a fresh dict of the call's keyword arguments (plus ``batch_axes`` with
  ``func_can_batch=True``, in jaxbind's form: per argument, the axes of the
  vmap levels that batch it).
* ``abstract(*args, **kwargs)`` returns one ``(shape, dtype)`` or
  ``(shape, dtype, out_batch_axis)`` tuple per result.
* Calls return a list of arrays, one per result.

What changes: every dtype xlabind supports instead of four, keyword arguments
need not be picklable (only hashable), errors are Python exceptions with
messages, no raw object addresses reach the HLO, derivatives go to any order
the transposes allow, a callback that rebinds an entry of ``out``
(``out[0] = y`` instead of ``out[0][()] = y``) is an error instead of
returning uninitialised memory, and a batched result whose shape does not
fit the unbatched one is an error instead of a wrong answer.

What stays: a call made once per device (inside ``jax.shard_map``) takes no
collective of its own, as in jaxbind, so it may sit in a branch or loop that
only some devices take; a failure there ends its own device's run only.
``stop_all_devices=True`` opts into xlabind's failure exchange instead
(docs/semantics.md, "Failures on one device").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast, overload

import numpy as np

from xlabind import BatchedResult, linear, multilinear, nonlinear

__all__ = ["get_linear_call", "get_nonlinear_call", "load_kwargs"]

# jaxbind callbacks run wherever the computation runs: on a CUDA device `out`
# and `args` hold xlabind.cuda.DeviceArray objects (use CuPy or PyTorch there).
_PLATFORMS = ("cpu", "cuda")


class _KwargsDump:
    """What callbacks receive as ``kwargs_dump``; only :func:`load_kwargs` reads it."""

    __slots__ = ("_kwargs",)

    def __init__(self, kwargs: dict):
        self._kwargs = kwargs


def load_kwargs(kwargs_dump: Any, /) -> dict:
    """A new dict of the keyword arguments a callback was called with.

    Example:
      >>> import jax.numpy as jnp
      >>> from xlabind import jaxbind
      >>> seen = []
      >>> def f(out, args, kwargs_dump):
      ...     seen.append(jaxbind.load_kwargs(kwargs_dump))
      ...     out[0][()] = args[0]
      >>> op = jaxbind.get_linear_call(f, f, lambda x, **kw: ((x.shape, x.dtype),),
      ...                              lambda x, **kw: ((x.shape, x.dtype),))
      >>> _ = op(jnp.ones(1), mode="fast", n=3); seen
      [{'mode': 'fast', 'n': 3}]
    """
    if isinstance(kwargs_dump, _KwargsDump):
        return dict(kwargs_dump._kwargs)
    if isinstance(kwargs_dump, np.ndarray) and kwargs_dump.dtype == np.uint8:
        import pickle  # jaxbind's own serialized form, for callbacks that build one

        return pickle.loads(kwargs_dump.tobytes())
    raise TypeError(
        f"load_kwargs expects the kwargs_dump a callback received, got {type(kwargs_dump).__name__}"
    )


def _jaxbind_batch_axes(batch_axes):
    """xlabind's batch axes (one entry per vmap level, None where unbatched) in
    jaxbind's form (the axes of the levels that batch each argument)."""
    if batch_axes is None:
        return None
    return tuple(tuple(a for a in entry if a is not None) for entry in batch_axes)


def _jaxbind_kwargs(kwargs: dict, batched: bool) -> dict:
    """The keyword arguments as jaxbind passes them; with func_can_batch,
    xlabind's ``batch_axes`` in jaxbind's form (without it, a ``batch_axes`` is
    the caller's own and passes unchanged)."""
    if batched and "batch_axes" in kwargs:
        kwargs = {**kwargs, "batch_axes": _jaxbind_batch_axes(kwargs["batch_axes"])}
    return kwargs


class _JaxbindCallback:
    """A jaxbind callback ``f(out, args, kwargs_dump)``, bound in place.

    On the CPU xlabind's handler calls it directly in jaxbind's convention
    (ffi/common/callback_registry.h, kJaxbind: no Python frame in between),
    checking that it returns None, keeps each entry of ``out`` and writes
    every result; elsewhere ``in_place_function`` adapts it."""

    #: How _runtime/python_functions.py knows to call it the jaxbind way.
    xlabind_convention = "jaxbind"

    def __init__(self, f: Callable, batched: bool):
        if not callable(f):
            raise TypeError(f"xlabind.jaxbind: callbacks must be callable, got {type(f).__name__}")
        self.callback = f
        self.batched = batched
        self.__qualname__ = getattr(f, "__qualname__", repr(f))

    def __call__(self, *args, **kwargs):
        raise TypeError(
            f"{self.__qualname__} is a jaxbind callback: call it as f(out, args, kwargs_dump)"
        )

    def kwargs_dump(self, kwargs: dict) -> _KwargsDump:
        return _KwargsDump(_jaxbind_kwargs(kwargs, self.batched))

    def in_place_function(self) -> Callable:
        """The callback as an xlabind in-place function ``fn(*args, out, **kwargs)``."""
        f, name, dump = self.callback, self.__qualname__, self.kwargs_dump

        def in_place(*args, out, **kwargs):
            results = list(out) if isinstance(out, (tuple, list)) else [out]
            given = list(results)
            returned = f(results, args, dump(kwargs))
            if returned is not None:
                raise TypeError(
                    f"{name} is a jaxbind callback: it must write its results into "
                    f"`out` (out[i][...] = value) and return None, but it returned "
                    f"{type(returned).__name__}"
                )
            for i, (now, then) in enumerate(zip(results, given)):
                if now is not then or len(results) != len(given):
                    raise TypeError(
                        f"{name} replaced out[{i}] instead of writing into it: the result "
                        f"arrays are XLA's own memory, so write with out[{i}][()] = value "
                        f"(or out[{i}][...] = value)."
                    )

        in_place.__qualname__ = name
        return in_place


@overload
def _callback(f: Callable, batched: bool) -> _JaxbindCallback: ...
@overload
def _callback(f: None, batched: bool) -> None: ...
def _callback(f: Callable | None, batched: bool) -> _JaxbindCallback | None:
    """A jaxbind callback (out, args, kwargs_dump) for xlabind's in-place binding."""
    return None if f is None else _JaxbindCallback(f, batched)


def _abstract(abstract: Callable | None, batched: bool) -> Callable | None:
    """A jaxbind abstract function as an xlabind result-shape function."""
    if abstract is None:
        return None
    name = getattr(abstract, "__qualname__", repr(abstract))

    def result_shape_dtypes(*args, **kwargs):
        results = abstract(*args, **_jaxbind_kwargs(kwargs, batched))
        return tuple(_result(name, i, r) for i, r in enumerate(_results(name, results)))

    return result_shape_dtypes


def _results(name: str, results) -> list:
    """What an abstract function returned, as its list of per-result tuples."""
    expected = (
        "one (shape, dtype) or (shape, dtype, batch_axis) tuple per result, e.g. "
        "((x.shape, x.dtype),)"
    )
    if not isinstance(results, (tuple, list)):
        raise TypeError(
            f"xlabind.jaxbind: abstract function {name} returned "
            f"{type(results).__name__}; expected {expected}"
        )
    first = results[0] if results else None
    if (
        len(results) in (2, 3)
        and isinstance(first, (tuple, list))
        and all(isinstance(d, (int, np.integer)) for d in first)
        and (isinstance(results[1], (type, np.dtype, str)) or hasattr(results[1], "dtype"))
    ):
        raise TypeError(
            f"xlabind.jaxbind: abstract function {name} returned one (shape, "
            f"dtype) pair, {results!r}; expected {expected} (wrap it in a tuple)"
        )
    return list(results)


def _result(name: str, index: int, r) -> BatchedResult:
    try:
        shape = tuple(int(d) for d in r[0])
        dtype = np.dtype(r[1])
    except (TypeError, IndexError, ValueError) as e:
        raise TypeError(
            f"xlabind.jaxbind: abstract function {name} returned {r!r} for result "
            f"{index}; expected (shape, dtype) or (shape, dtype, batch_axis) ({e})"
        ) from None
    axis = r[2] if len(r) > 2 and isinstance(r[2], int) else None
    return BatchedResult(shape, dtype, axis)


def _checked_fixed(first_n_args_fixed) -> int:
    if isinstance(first_n_args_fixed, bool) or not isinstance(
        first_n_args_fixed, (int, np.integer)
    ):
        raise TypeError(
            f"xlabind.jaxbind: first_n_args_fixed must be an int, got {first_n_args_fixed!r}"
        )
    if first_n_args_fixed < 0:
        raise ValueError(
            f"xlabind.jaxbind: first_n_args_fixed must be 0 or more, got {first_n_args_fixed}"
        )
    return int(first_n_args_fixed)


def _use_jaxbind_terms(op, fixed: int, missing_transpose: str | None) -> None:
    """Errors in jaxbind's words (f_T, f_derivative, first_n_args_fixed)."""
    op.definition.terms["nondiff"] = f"is one of the first_n_args_fixed={fixed} arguments"
    if missing_transpose is not None:
        op.definition.terms["missing_transpose"] = missing_transpose


def _as_list_call(op, first_n_args_fixed: int) -> Callable:
    def call(*args, **kwargs) -> list:
        if first_n_args_fixed > len(args):
            raise ValueError(
                f"{op.name}: first_n_args_fixed={first_n_args_fixed}, but the call "
                f"has only {len(args)} positional arguments"
            )
        return list(op(*args, **kwargs))

    call.__doc__ = getattr(op.fn, "callback", op.fn).__doc__
    call.xlabind_op = op  # type: ignore[attr-defined]  # the underlying BoundFunction
    return call


def get_linear_call(
    f: Callable,
    f_T: Callable | Sequence[Callable | None] | None,
    /,
    abstract: Callable,
    abstract_T: Callable | Sequence[Callable | None] | None,
    *,
    first_n_args_fixed: int = 0,
    func_can_batch: bool = False,
    stop_all_devices: bool = False,
) -> Callable:
    """A linear (or, with a tuple of transposes, multilinear) function as a JAX call.

    ``f`` is linear in its arguments after the first ``first_n_args_fixed``
    (jointly; separately in each for the multilinear form). ``f_T`` is called
    as ``f_T(out, (*fixed_args, *cotangents), kwargs_dump)``; in the
    multilinear form, transpose i as ``T_i(out, (*args_without_i,
    *cotangents), kwargs_dump)``. See the module docstring for conventions.
    ``stop_all_devices`` (xlabind's, not jaxbind's) is
    :func:`xlabind.linear`'s, off by default as jaxbind has no such
    collective: ``True`` makes a failure in one device's call stop every
    device, and then no call may sit in a branch that only some devices take.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from xlabind import jaxbind
      >>> def scale(out, args, kwargs_dump):
      ...     out[0][()] = jaxbind.load_kwargs(kwargs_dump)["factor"] * args[0]
      >>> def shapes(x, **kwargs):
      ...     return ((x.shape, x.dtype),)
      >>> op = jaxbind.get_linear_call(scale, scale, shapes, shapes)  # its own transpose
      >>> op(jnp.ones(2), factor=3.0)[0]
      Array([3., 3.], dtype=float32)
      >>> jax.grad(lambda x: op(x, factor=3.0)[0].sum())(jnp.ones(2))
      Array([3., 3.], dtype=float32)
    """
    fixed = _checked_fixed(first_n_args_fixed)
    b = bool(func_can_batch)
    common: dict[str, Any] = dict(
        nondiff_argnums=range(fixed),
        in_place=True,
        vmap_method="native" if b else "sequential",
        platforms=_PLATFORMS,
        stop_all_devices=stop_all_devices,
    )
    if isinstance(f_T, (tuple, list)):
        abstracts = tuple(abstract_T) if isinstance(abstract_T, (tuple, list)) else ()
        op = multilinear(
            _callback(f, b),
            [_callback(t, b) for t in f_T],
            _abstract(abstract, b),
            transpose_shape_dtypes=[_abstract(a, b) for a in abstracts],
            **common,
        )
    else:  # one transpose (or None), not a sequence of them
        op = linear(
            _callback(f, b),
            _callback(cast(Callable | None, f_T), b),
            _abstract(abstract, b),
            transpose_shape_dtypes=_abstract(cast(Callable | None, abstract_T), b),
            **common,
        )
    _use_jaxbind_terms(
        op,
        fixed,
        None  # multilinear: its own words (a transpose of a transpose)
        if isinstance(f_T, (tuple, list))
        else "Pass f_T (the transpose) to jaxbind.get_linear_call.",
    )
    return _as_list_call(op, fixed)


def get_nonlinear_call(
    f: Callable,
    f_derivative: tuple[Callable, Callable],
    /,
    abstract: Callable,
    abstract_reverse: Callable | None,
    *,
    first_n_args_fixed: int = 0,
    func_can_batch: bool = False,
    stop_all_devices: bool = False,
) -> Callable:
    """A nonlinear function with its ``(jvp, vjp)`` callbacks as a JAX call.

    ``jvp(out, (*args, *tangents_of_non_fixed_args), kwargs_dump)`` writes the
    result tangents; ``vjp(out, (*args, *cotangents), kwargs_dump)`` writes one
    cotangent per non-fixed argument. ``stop_all_devices`` (xlabind's, not
    jaxbind's) is :func:`xlabind.nonlinear`'s, off by default as for
    :func:`get_linear_call`.

    Example:
      >>> import jax, jax.numpy as jnp, numpy as np
      >>> from xlabind import jaxbind
      >>> def square(out, args, kwargs_dump):
      ...     out[0][()] = args[0] ** 2
      >>> def jvp(out, args, kwargs_dump):  # (x, dx) -> 2 x dx
      ...     out[0][()] = 2 * args[0] * args[1]
      >>> def vjp(out, args, kwargs_dump):  # (x, dy) -> 2 x dy
      ...     out[0][()] = 2 * args[0] * args[1]
      >>> def shapes(*args, **kwargs):
      ...     return ((args[0].shape, args[0].dtype),)
      >>> op = jaxbind.get_nonlinear_call(square, (jvp, vjp), shapes, shapes)
      >>> jax.grad(lambda x: op(x)[0].sum())(jnp.array([1.0, 2.0]))
      Array([2., 4.], dtype=float32)
    """
    jvp, vjp = f_derivative
    fixed = _checked_fixed(first_n_args_fixed)
    b = bool(func_can_batch)
    op = nonlinear(
        _callback(f, b),
        _abstract(abstract, b),
        jvp=_callback(jvp, b),
        vjp=_callback(vjp, b),
        vjp_shape_dtypes=_abstract(abstract_reverse, b),
        nondiff_argnums=range(fixed),
        in_place=True,
        vmap_method="native" if b else "sequential",
        platforms=_PLATFORMS,
        stop_all_devices=stop_all_devices,
    )
    _use_jaxbind_terms(
        op, fixed, "Pass f_derivative=(jvp, vjp) with a vjp to jaxbind.get_nonlinear_call."
    )
    return _as_list_call(op, fixed)
