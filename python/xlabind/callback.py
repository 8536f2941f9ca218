"""`xlabind.callback`: a Python function on XLA's buffers, as a JAX operation.

A :class:`Callback` holds the user's function, how its results' shapes are
found, how it behaves under vmap, and (for the differentiable kinds in
linear.py, multilinear.py and nonlinear.py) its derivative rules. Calling it
binds the `xlabind_callback` primitive (callback_primitive.py).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from xlabind import _native
from xlabind._static_kwargs import StaticKwargs

ResultSpec = Any  # a pytree of objects with .shape and .dtype (e.g. jax.ShapeDtypeStruct)

#: How a bound function behaves under ``jax.vmap``.
#:
#: * ``"sequential"``: one call per batch element (``lax.map``); always works.
#: * ``"expand_dims"``: one call; batched arguments get their batch axis in
#:   front, unbatched ones a new axis of size 1; results must carry the batch
#:   axis in front.
#: * ``"broadcast_all"``: like ``"expand_dims"`` but every argument is
#:   broadcast to the full batch size.
#: * ``"native"``: one call on the arrays as vmap laid them out; the function
#:   and the result-shape function receive ``batch_axes`` (see README) and the
#:   result-shape function reports each result's batch axis with
#:   :class:`BatchedResult`.
VMAP_METHODS = ("sequential", "expand_dims", "broadcast_all", "native")


class BatchedResult(NamedTuple):
    """A result's shape and dtype plus the position of its newest batch axis.

    Returned (as leaves) by the result-shape function of a ``vmap_method="native"``
    bound function when it is called with ``batch_axes`` other than ``None``.
    """

    shape: tuple[int, ...]
    dtype: Any
    batch_axis: int | None = None


class Callback:
    """A Python function bound as a JAX operation. Create one with :func:`callback`
    (no derivatives) or :func:`xlabind.linear`, :func:`xlabind.multilinear`,
    :func:`xlabind.nonlinear`."""

    def __init__(self, fn: Callable, result_shape_dtypes: ResultSpec | Callable[..., ResultSpec] | None,
                 *, in_place: bool = False, name: str | None = None,
                 vmap_method: str = "sequential", nondiff_argnums: Sequence[int] = (),
                 rules: Any = None):
        if not callable(fn):
            raise TypeError(f"xlabind: fn must be callable, got {type(fn).__name__}")
        if vmap_method not in VMAP_METHODS:
            raise ValueError(f"xlabind: vmap_method must be one of {VMAP_METHODS}, got {vmap_method!r}")
        self.fn = fn
        self.result_shape_dtypes = result_shape_dtypes
        self.in_place = in_place
        self.name = name or getattr(fn, "__qualname__", None) or repr(fn)
        self.vmap_method = vmap_method
        self.nondiff_argnums = tuple(sorted(set(int(i) for i in nondiff_argnums)))
        #: Derivative rules (derivative_rules.LinearityRules) or None: not differentiable.
        self.rules = rules
        # One registry entry per (static kwargs, result tree, batch axes): its
        # adapter closes over all three.
        self._entries: dict[tuple, _native.CallbackEntry] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"xlabind.Callback({self.name})"

    @property
    def has_shape_function(self) -> bool:
        """Whether result shapes come from a function (not a fixed pytree, not None)."""
        spec = self.result_shape_dtypes
        return callable(spec) and not hasattr(spec, "shape")

    # -- calling -----------------------------------------------------------
    def __call__(self, *args: Any, **static_kwargs: Any) -> Any:
        """Calls the function on `args` (arrays); keyword arguments are static."""
        kwargs = self.check_kwargs(static_kwargs)
        operands = [self._as_operand(i, x) for i, x in enumerate(args)]
        self._check_nondiff_argnums(len(operands))
        result_avals, out_tree, _ = self.result_avals(operands, kwargs)
        results = self.bind(operands, kwargs, out_tree, result_avals)
        return jax.tree_util.tree_unflatten(out_tree, results)

    def bind(self, operands: Sequence[Any], kwargs: StaticKwargs, out_tree, result_avals,
             batch_axes=None, out_batch_axes=None) -> list:
        """Binds the primitive on flat operands; returns the flat results."""
        from xlabind.callback_primitive import callback_p  # the primitive imports this module

        return callback_p.bind(*operands, callback=self, static_kwargs=kwargs, out_tree=out_tree,
                               result_avals=tuple(result_avals), batch_axes=batch_axes,
                               out_batch_axes=out_batch_axes)

    def check_kwargs(self, static_kwargs: dict) -> StaticKwargs:
        for reserved in (("out",) if self.in_place else ()) + (
                ("batch_axes",) if self.vmap_method == "native" else ()):
            if reserved in static_kwargs:
                raise TypeError(f"{self.name}: keyword argument '{reserved}' is reserved by "
                                f"xlabind for this function; rename it")
        return StaticKwargs.from_call(self.name, static_kwargs)

    def _as_operand(self, index: int, x: Any) -> jax.Array:
        try:
            array = jnp.asarray(x)
        except TypeError as e:
            raise TypeError(f"{self.name}: argument {index} must be an array, got "
                            f"{type(x).__name__} ({e})") from None
        check_dtype(self.name, f"argument {index}", array.dtype)
        return array

    def _check_nondiff_argnums(self, n: int) -> None:
        bad = [i for i in self.nondiff_argnums if not 0 <= i < n]
        if bad:
            raise ValueError(f"{self.name}: nondiff_argnums {bad} out of range for a call with "
                             f"{n} positional arguments")

    # -- result shapes -----------------------------------------------------
    def result_avals(self, operands, kwargs: StaticKwargs, batch_axes=None):
        """(flat result avals, result tree, each result's batch axis or None)."""
        spec = self.result_shape_dtypes
        if self.has_shape_function:
            structs = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in operands]
            extra = {"batch_axes": batch_axes} if self.vmap_method == "native" else {}
            spec = spec(*structs, **kwargs.as_dict(), **extra)
        leaves, out_tree = jax.tree_util.tree_flatten(
            spec, is_leaf=lambda x: isinstance(x, BatchedResult))
        avals, axes = [], []
        for i, leaf in enumerate(leaves):
            if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
                raise TypeError(f"{self.name}: result_shape_dtypes must be a pytree of objects "
                                f"with .shape and .dtype (e.g. jax.ShapeDtypeStruct); leaf {i} "
                                f"is {type(leaf).__name__}")
            dtype = np.dtype(leaf.dtype)
            check_dtype(self.name, f"result {i}", dtype)
            avals.append(jax.core.ShapedArray(tuple(int(d) for d in leaf.shape), dtype))
            axes.append(getattr(leaf, "batch_axis", None))
        return tuple(avals), out_tree, tuple(axes)

    # -- the registry entry the lowering names ------------------------------
    def registry_entry(self, kwargs: StaticKwargs, out_tree, batch_axes) -> _native.CallbackEntry:
        """The registered entry for this call signature, made on first lowering."""
        key = (kwargs, out_tree, batch_axes)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                call_kwargs = kwargs.as_dict()
                if self.vmap_method == "native":
                    call_kwargs["batch_axes"] = batch_axes
                entry = _make_entry(self.fn, self.name, self.in_place, call_kwargs, out_tree)
                self._entries[key] = entry
            return entry


def _make_entry(fn, name, in_place, kwargs, out_tree) -> _native.CallbackEntry:
    leaf = jax.tree_util.treedef_is_leaf(out_tree)
    if in_place and (leaf or out_tree == jax.tree_util.tree_structure((0,) * out_tree.num_leaves)):
        # The handler calls fn(*operands, out=..., **kwargs) itself: no adapter frame.
        return _native.CallbackEntry(fn, name, in_place=True, single_result=leaf, kwargs=kwargs)
    make = _in_place_adapter if in_place else _returning_adapter
    return _native.CallbackEntry(make(fn, name, kwargs, out_tree), name)


def derived_vmap_method(parent: Callback, shape_function) -> str:
    """The vmap method of a function derived from `parent` (a transpose, a JVP):
    the parent's, except that native batching needs a result-shape function."""
    if parent.vmap_method == "native" and not callable(shape_function):
        return "sequential"
    return parent.vmap_method


def check_dtype(fn_name: str, what: str, dtype: np.dtype) -> None:
    """Raises a TypeError naming `what` unless the handler can pass `dtype` to Python."""
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
             in_place: bool = False, vmap_method: str = "sequential",
             name: str | None = None) -> Callback:
    """Binds a Python function so that JAX can call it, eagerly, under ``jax.jit``
    and ``jax.vmap``. It has no derivatives: see :func:`xlabind.linear`,
    :func:`xlabind.multilinear` and :func:`xlabind.nonlinear` for those.

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
      vmap_method: One of :data:`VMAP_METHODS`; ``"sequential"`` by default.
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
    return Callback(fn, result_shape_dtypes, in_place=in_place, vmap_method=vmap_method,
                    name=name)
