"""`xlabind.callback`: a Python function on XLA's buffers, as a JAX operation."""

from __future__ import annotations

import threading
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from xlabind import _native
from xlabind._static_kwargs import StaticKwargs
from xlabind.callback_primitive import callback_p

ResultSpec = Any  # a pytree of objects with .shape and .dtype (e.g. jax.ShapeDtypeStruct)


class Callback:
    """A Python function bound as a JAX operation. Create one with :func:`callback`."""

    def __init__(self, fn: Callable, result_shape_dtypes: ResultSpec | Callable[..., ResultSpec],
                 *, in_place: bool = False, name: str | None = None):
        if not callable(fn):
            raise TypeError(f"xlabind.callback: fn must be callable, got {type(fn).__name__}")
        self.fn = fn
        self.result_shape_dtypes = result_shape_dtypes
        self.in_place = in_place
        self.name = name or getattr(fn, "__qualname__", None) or repr(fn)
        # One registry entry per (static kwargs, result tree): its adapter closes over both.
        self._entries: dict[tuple[StaticKwargs, Any], _native.CallbackEntry] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"xlabind.Callback({self.name})"

    def __call__(self, *args: Any, **static_kwargs: Any) -> Any:
        """Calls the function on `args` (arrays); keyword arguments are static."""
        if self.in_place and "out" in static_kwargs:
            raise TypeError(f"{self.name}: 'out' is reserved for the result arrays of an "
                            f"in_place callback; rename that keyword argument")
        kwargs = StaticKwargs.from_call(self.name, static_kwargs)
        operands = [self._as_operand(i, x) for i, x in enumerate(args)]
        result_avals, out_tree = self._result_avals(operands, kwargs)
        results = callback_p.bind(*operands, callback=self, static_kwargs=kwargs,
                                  out_tree=out_tree, result_avals=result_avals)
        return jax.tree_util.tree_unflatten(out_tree, results)

    def _as_operand(self, index: int, x: Any) -> jax.Array:
        try:
            array = jnp.asarray(x)
        except TypeError as e:
            raise TypeError(f"{self.name}: argument {index} must be an array, got "
                            f"{type(x).__name__} ({e})") from None
        _check_dtype(self.name, f"argument {index}", array.dtype)
        return array

    def _result_avals(self, operands, kwargs: StaticKwargs):
        spec = self.result_shape_dtypes
        if callable(spec) and not hasattr(spec, "shape"):
            avals = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in operands]
            spec = spec(*avals, **kwargs.as_dict())
        leaves, out_tree = jax.tree_util.tree_flatten(spec)
        result_avals = []
        for i, leaf in enumerate(leaves):
            if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
                raise TypeError(f"{self.name}: result_shape_dtypes must be a pytree of objects "
                                f"with .shape and .dtype (e.g. jax.ShapeDtypeStruct); leaf {i} "
                                f"is {type(leaf).__name__}")
            dtype = np.dtype(leaf.dtype)
            _check_dtype(self.name, f"result {i}", dtype)
            shape = tuple(int(d) for d in leaf.shape)
            result_avals.append(jax.core.ShapedArray(shape, dtype))
        return tuple(result_avals), out_tree

    def _registry_entry(self, kwargs: StaticKwargs, out_tree) -> _native.CallbackEntry:
        """The registered entry for this call signature, made on first lowering."""
        with self._lock:
            entry = self._entries.get((kwargs, out_tree))
            if entry is None:
                adapter = (_in_place_adapter if self.in_place else _returning_adapter)(
                    self.fn, self.name, kwargs.as_dict(), out_tree)
                entry = _native.CallbackEntry(adapter, self.name)
                self._entries[(kwargs, out_tree)] = entry
            return entry


def _check_dtype(fn_name: str, what: str, dtype: np.dtype) -> None:
    if np.dtype(dtype) not in _native.SUPPORTED_DTYPES:
        supported = ", ".join(sorted(str(d) for d in _native.SUPPORTED_DTYPES))
        raise TypeError(f"{fn_name}: {what} has dtype {dtype}, which xlabind cannot pass to "
                        f"Python; supported dtypes: {supported}")


def _returning_adapter(fn, name, kwargs, out_tree):
    """Calls fn(*operands, **kwargs) and copies what it returns into the results."""

    def adapter(operands, results):
        returned = fn(*operands, **kwargs)
        try:
            leaves = out_tree.flatten_up_to(returned)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{name} returned {type(returned).__name__}, which does not match "
                            f"the declared result structure {out_tree}: {e}") from None
        for i, (value, out) in enumerate(zip(leaves, results)):
            _store_result(name, i, value, out)

    return adapter


def _store_result(name: str, index: int, value: Any, out: np.ndarray) -> None:
    if isinstance(value, (bool, int, float, complex)):
        value = np.asarray(value, dtype=out.dtype)  # Python scalars carry no dtype
    else:
        value = np.asarray(value)
        if value.dtype != out.dtype:
            raise TypeError(f"{name}: result {index} has dtype {value.dtype}, expected "
                            f"{out.dtype} (as declared in result_shape_dtypes)")
    if value.shape != out.shape:
        raise ValueError(f"{name}: result {index} has shape {value.shape}, expected "
                         f"{out.shape} (as declared in result_shape_dtypes)")
    np.copyto(out, value, casting="no")


def _in_place_adapter(fn, name, kwargs, out_tree):
    """Calls fn(*operands, out=results, **kwargs); fn writes the results itself."""

    def adapter(operands, results):
        returned = fn(*operands, out=jax.tree_util.tree_unflatten(out_tree, results), **kwargs)
        if returned is not None:
            raise TypeError(f"{name} is an in_place callback: it must write into `out` and "
                            f"return None, but it returned {type(returned).__name__}")

    return adapter


def callback(fn: Callable, result_shape_dtypes: ResultSpec | Callable[..., ResultSpec], *,
             in_place: bool = False, name: str | None = None) -> Callback:
    """Binds a Python function so that JAX can call it, eagerly and under ``jax.jit``.

    Inside a compiled computation XLA hands the function its buffers as NumPy
    arrays without copying: operands read-only, results writable.

    Args:
      fn: The function. ``fn(*arrays, **static_kwargs)`` returns the results
        (a pytree matching ``result_shape_dtypes``), which xlabind checks and
        copies into XLA's buffers. With ``in_place=True`` it is called as
        ``fn(*arrays, out=results, **static_kwargs)``, writes into ``out``
        (the same pytree, of writable arrays) and returns ``None``: no copy.
        It must not keep any of the arrays after it returns.
      result_shape_dtypes: The results' shapes and dtypes: a pytree of
        ``jax.ShapeDtypeStruct`` (anything with ``.shape`` and ``.dtype``), or
        a function ``(*input_structs, **static_kwargs) -> pytree`` computing it
        from the inputs' shapes and dtypes.
      in_place: Whether ``fn`` writes its results into ``out`` itself.
      name: The name used in error messages; defaults to ``fn.__qualname__``.

    Returns:
      A :class:`Callback`. Call it with arrays as positional arguments and
      static Python values (hashable) as keyword arguments.

    Example:
      >>> import jax, jax.numpy as jnp, numpy as np, xlabind
      >>> cumsum = xlabind.callback(np.cumsum, lambda x: x)
      >>> jax.jit(cumsum)(jnp.arange(4.0))
      Array([0., 1., 3., 6.], dtype=float32)
    """
    return Callback(fn, result_shape_dtypes, in_place=in_place, name=name)
