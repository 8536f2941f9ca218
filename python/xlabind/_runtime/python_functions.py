"""How a bound function runs when it is Python: one function per platform,
called by xlabind's FFI handler on XLA's own buffers.

For each call signature (platform, static kwargs, result tree, batch axes) a
registry entry (`_extension.CallbackEntry`) holds what the handler calls: the
user's in-place function itself (called straight from C++), or an adapter
that calls it and stores what it returns. The implementation holds its
entries (so one signature always lowers to the same key, and programs made
from it compile to the same executable), and so does each lowered program
until it is compiled; a compiled executable holds what its calls need on the
C++ side (ffi/common/callback_state.h), however long it runs.
"""

from __future__ import annotations

import hashlib
import inspect
import operator
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.interpreters import mlir

from xlabind import _jax_internals
from xlabind._platforms import (
    PLATFORMS,
    PYTHON_LOWERING_CACHEABLE,
    Platform,
    platform_name,
    platform_names,
)
from xlabind._runtime import extension as _extension
from xlabind._runtime import ffi_custom_call, python_on_cuda, python_on_tpu


def functions_by_platform(
    name: str, fn: Callable | Mapping[str, Callable], platforms: Sequence[str]
) -> dict[str, Callable]:
    """{platform: function} from what a user passed: a mapping, or one function
    for every platform in `platforms`."""
    where = f"xlabind: {name}"
    if isinstance(fn, Mapping):
        table = {}
        for platform, f in fn.items():
            key = platform_name(where, platform)
            if key in table:
                raise ValueError(f"{where}: two functions for platform {key!r}")
            table[key] = f
    else:
        table = dict.fromkeys(platform_names(where, platforms), fn)
    for platform, f in table.items():
        if not callable(f):
            raise TypeError(
                f"xlabind: {name}: the function for {platform!r} must be callable, "
                f"got {type(f).__name__}"
            )
    if not table:
        raise ValueError(f"xlabind: {name}: no function given")
    return table


def function_name(fn: Any) -> str:
    first = next(iter(fn.values())) if isinstance(fn, Mapping) else fn
    return getattr(first, "__qualname__", None) or getattr(first, "name", None) or repr(first)


class PythonImplementation:
    """Python functions by platform, and how the handler calls them."""

    #: The function lives in this process: an exported artifact could not call it.
    exportable = False
    #: A Python function runs once per program on arrays no device splits.
    replicable = False
    #: Whether two alike calls may share one lowering: not where a platform
    #: runs Python through host transfers (_platforms.py).
    lowering_cacheable = PYTHON_LOWERING_CACHEABLE

    @staticmethod
    def placed_on(platform: Platform) -> bool:
        """Whether a sharding rule may place the call per device on `platform`."""
        return platform.places_python_calls

    @staticmethod
    def export_error(name: str) -> NotImplementedError:
        """What jax.export of a program that calls it raises."""
        return NotImplementedError(
            f"xlabind: jax.export cannot serialize '{name}': it calls a Python function that "
            f"lives only in this process. Export the parts of the program around it, or bind "
            f"a native FFI target instead."
        )

    def __init__(
        self,
        functions: dict[str, Callable],
        *,
        in_place: bool,
        unwrap_one_tuple: bool = False,
        synchronize: bool = False,
        command_buffer_compatible: bool = False,
    ):
        self.functions = functions
        self.in_place = in_place
        #: CUDA: the call may be captured into a CUDA graph (in place only).
        self.command_buffer_compatible = command_buffer_compatible
        #: CUDA: wait for XLA's stream before each call and for the device after it.
        self.synchronize = synchronize
        #: A derived function (transpose, VJP) with one result may return it as a
        #: 1-tuple, the habit jax.custom_vjp teaches.
        self.unwrap_one_tuple = unwrap_one_tuple
        self._entries: dict[Any, Any] = {}
        self._lock = threading.Lock()

    @property
    def primary_function(self) -> Callable:
        return self.functions.get("cpu") or next(iter(self.functions.values()))

    @property
    def platforms(self) -> tuple[str, ...]:
        return tuple(self.functions)

    def function_for(self, platform: str, name: str) -> Callable:
        fn = self.functions.get(platform)
        fallback = PLATFORMS[platform].python_fallback if platform in PLATFORMS else None
        if fn is None and fallback is not None:
            # Host transfers hand the function host copies of its operands:
            # the fallback platform's function is the host function unless
            # one is given for this platform.
            fn = self.functions.get(fallback)
        if fn is None:
            have = " and ".join(self.functions)
            first = next(iter(self.functions))
            raise NotImplementedError(
                f"xlabind: '{name}' has no {platform.upper()} implementation (it was bound with "
                f"a function for {have} only), so it cannot run inside a {platform.upper()} "
                f"computation. Pass one function per platform "
                f"(e.g. {{'cpu': numpy_fn, 'cuda': cupy_fn}}), or platforms=('cpu', 'cuda') "
                f"for one function that works on both, or place its inputs on a {first.upper()} "
                f"device (jax.device_put(x, jax.devices('{first}')[0]))."
            )
        return fn

    def check_dtype(self, name: str, what: str, dtype) -> None:
        """Raises a TypeError naming `what` unless the handler can pass `dtype` to Python."""
        if np.dtype(dtype) not in _extension.SUPPORTED_DTYPES:
            supported = ", ".join(sorted(str(d) for d in _extension.SUPPORTED_DTYPES))
            raise TypeError(
                f"{name}: {what} has dtype {dtype}, which xlabind cannot pass to "
                f"Python; supported dtypes: {supported}"
            )

    def emitter(self, record: Platform, op, call):
        """(emit(ctx, operands, token) -> (the call's results, token out), what the
        lowered program must keep alive until it is compiled), on `record`'s
        platform."""
        if record.host_transfers:
            return self._host_transfer_emitter(record.name, op, call), None
        if record.python_calls != "buffers":
            raise NotImplementedError(
                f"xlabind: '{op.name}' is a Python function, which cannot run inside a "
                f"{record.name.upper()} computation."
            )
        platform = record.name
        _extension.register_callback_handlers(platform)
        entry = self.registry_entry(platform, op.name, call)
        attributes = {"callback_key": np.uint64(entry.key)}
        if call.reports_status:
            # A status is copied from the host when the call fails, which no
            # graph can replay: such a call is never captured.
            target = _extension.PYTHON_CALLBACK_STATUS_TARGET
        elif platform == "cuda" and self.command_buffer_compatible:
            target = _extension.PYTHON_CALLBACK_GRAPH_TARGET
        else:
            target = _extension.PYTHON_CALLBACK_TARGET
        options = call.custom_call_options

        def emit(ctx, operands, token=None):
            if platform == "cuda":
                _check_cuda_dtypes(op.name, ctx)
            return ffi_custom_call.emit(target, ctx, operands, attributes, options, token)

        return emit, entry

    def _host_transfer_emitter(self, platform: str, op, call):
        """A program on `platform` (a TPU) calls the function on the host
        through XLA's host-callback transfers (python_on_tpu.py): no registry
        entry, since jax registers the host function with the program it
        lowers."""
        name = op.name
        fn: Any = self.function_for(platform, name)
        kwargs = call.kwargs.as_dict()
        if call.fn.vmap_method == "native":
            kwargs["batch_axes"] = call.batch_axes
        jaxbind = _is_jaxbind(fn)
        if jaxbind:
            name = _jaxbind_name(fn, name)
            fn = fn.in_place_function()
        in_place = self.in_place or jaxbind
        out_tree = call.out_tree
        builder, flatten = None, None
        if not in_place:
            flatten = _flattener(name, out_tree, self.unwrap_one_tuple)
        elif jax.tree_util.treedef_is_leaf(out_tree):
            builder = operator.itemgetter(0)
        elif out_tree != jax.tree_util.tree_structure((0,) * out_tree.num_leaves):
            builder = out_tree.unflatten

        def emit(ctx, operands, token=None):
            if len(ctx.module_context.platforms) > 1:
                raise NotImplementedError(
                    f"xlabind: '{name}' is a Python function, which a {platform.upper()} "
                    f"program calls through host transfers; those cannot be lowered for "
                    f"several platforms at once (nor can jax.pure_callback's). Lower the "
                    f"program for one platform."
                )
            avals_out = list(ctx.avals_out[:-1] if call.reports_status else ctx.avals_out)
            host = python_on_tpu.host_function(
                fn,
                name,
                kwargs,
                avals_out,
                in_place=in_place,
                out_builder=builder,
                flatten=flatten,
                aliases=call.aliases,
                jaxbind=jaxbind,
                check=checked_result,
            )
            results, token = python_on_tpu.emit_host_call(
                ctx.replace(avals_out=avals_out),
                host,
                token,
                operands,
                has_side_effect=op.effect is not None,
                name=name,
            )
            if call.reports_status:  # one host call per program: it never fails alone
                results.append(mlir.ir_constant(np.zeros(_extension.STATUS_BYTES, np.uint8)))
            return results, token

        return emit

    def registry_entry(self, platform: str, name: str, call) -> Any:
        """The registered entry for this call signature, made on first lowering."""
        key = (platform, call.kwargs, call.out_tree, call.batch_axes, call.aliases)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                fn = self.function_for(platform, name)
                kwargs = call.kwargs.as_dict()
                if call.fn.vmap_method == "native":
                    kwargs["batch_axes"] = call.batch_axes
                preferred = preferred_key(platform, name, fn, key[1:])
                entry = self._make_entry(
                    platform, fn, name, kwargs, call.out_tree, call.aliases, preferred
                )
                self._entries[key] = entry
            return entry

    def _make_entry(self, platform, fn, name, kwargs, out_tree, aliases=(), preferred=0):
        def entry(callable, name, **options):
            return _extension.CallbackEntry(callable, name, preferred_key=preferred, **options)

        if _is_jaxbind(fn):
            name = _jaxbind_name(fn, name)
            if platform == "cpu":
                return entry(fn.callback, name, jaxbind_kwargs_dump=fn.kwargs_dump(kwargs))
            fn = fn.in_place_function()
        if self.in_place:
            # The handler calls fn(*operands, out=..., **kwargs) itself and checks
            # that it returns None: on the CPU with no adapter frame at all.
            if platform == "cuda":
                fn = python_on_cuda.in_place_function(
                    fn, self.synchronize, self.command_buffer_compatible, name
                )
            leaf = jax.tree_util.treedef_is_leaf(out_tree)
            flat = out_tree == jax.tree_util.tree_structure((0,) * out_tree.num_leaves)
            builder = None if leaf or flat else (lambda results: out_tree.unflatten(results))
            return entry(
                fn, name, in_place=True, single_result=leaf, kwargs=kwargs, out_builder=builder
            )
        flatten = _flattener(name, out_tree, self.unwrap_one_tuple)
        if platform == "cuda":
            adapter = python_on_cuda.returning_adapter(
                fn, name, kwargs, out_tree, self.unwrap_one_tuple, self.synchronize, flatten
            )
        else:
            adapter = _returning_adapter(
                fn, name, kwargs, flatten, aliased=frozenset(j for _, j in aliases)
            )
        return entry(adapter, name)


def _is_jaxbind(fn: Any) -> bool:
    """Whether `fn` is one of xlabind.jaxbind's callbacks."""
    return getattr(fn, "xlabind_convention", None) == "jaxbind"


def _jaxbind_name(fn: Any, name: str) -> str:
    """The name errors give a jaxbind callback: a transpose, JVP or VJP is
    named by the callback too."""
    return name if fn.__qualname__ in name else f"{fn.__qualname__} ({name})"


def preferred_key(platform: str, name: str, fn: Callable, signature: tuple) -> int:
    """A registry key for `fn` called with `signature` (static kwargs, result
    tree, batch axes, aliases) on `platform` that every process lowering the
    same program derives alike: a hash of the function's name and where its
    code is, and of the call. Two processes then lower one program to one
    text, which jax's persistent compilation cache finds from either; the
    registry makes a key it already holds the next free one (a lambda made
    twice, say), so within a process the key still names one function."""
    target = inspect.unwrap(fn)
    code = getattr(target, "__code__", None) or getattr(type(target).__call__, "__code__", None)
    where = (code.co_filename, code.co_firstlineno) if code is not None else ()
    text = repr(
        (
            platform,
            name,
            getattr(target, "__module__", None),
            getattr(target, "__qualname__", type(target).__qualname__),
            where,
            signature,
        )
    )
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 62) - 1) or 1


# XLA packs these several to a byte; neither the CUDA array interface nor
# DLPack can describe that.
_PACKED = frozenset(
    d
    for d in _extension.SUPPORTED_DTYPES
    if d.name in ("int2", "uint2", "int4", "uint4", "float4_e2m1fn")
)


def check_command_buffer_compatible(
    name: str, functions: Mapping[str, Callable], *, in_place: bool, synchronize: bool
) -> None:
    """Raises unless a function declared command_buffer_compatible can be
    captured into a CUDA graph: it writes into `out` (a returned array would be
    allocated during capture and copied from), never waits for the host, and
    runs on CUDA."""
    where = f"xlabind: {name}: command_buffer_compatible=True"
    if "cuda" not in functions:
        raise ValueError(
            f"{where} is for CUDA functions (CUDA graphs); this one runs on "
            f"{' and '.join(functions)} only"
        )
    if not in_place:
        raise ValueError(
            f"{where} needs in_place=True: a function that returns its results "
            f"allocates them, which a CUDA graph cannot replay"
        )
    if synchronize:
        raise ValueError(
            f"{where} cannot be combined with synchronize=True: a captured call "
            f"cannot wait for the device"
        )


def _check_cuda_dtypes(name, ctx):
    for kind, avals in (("argument", ctx.avals_in), ("result", ctx.avals_out)):
        for i, aval in enumerate(avals):
            if np.dtype(aval.dtype) in _PACKED:
                raise TypeError(
                    f"{name}: {kind} {i} has dtype {aval.dtype}, which CUDA callbacks cannot "
                    f"receive: XLA packs it several to a byte. Convert it (e.g. to int8) "
                    f"around the call."
                )


def _flattener(name, out_tree, unwrap_one_tuple) -> Callable[[Any], list]:
    """What a function returned, as the flat list of its results."""
    if jax.tree_util.treedef_is_leaf(out_tree):

        def single(returned):
            if unwrap_one_tuple and isinstance(returned, (tuple, list)) and len(returned) == 1:
                returned = returned[0]
            return [returned]

        return single

    def tree(returned):
        try:
            return out_tree.flatten_up_to(returned)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"{name} returned {type(returned).__name__}, which does not match "
                f"the declared result structure {out_tree}: {e}"
            ) from None

    return tree


def _returning_adapter(fn, name, kwargs, flatten, aliased=frozenset()):
    """Calls fn(*operands, **kwargs) and copies what it returns into the results.

    A result in `aliased` shares its buffer with an operand: a returned value
    that is a view of that buffer (the operand itself, say) is copied out
    before the first result is stored, so that storing one result cannot
    change another one still to be stored."""

    def adapter(operands, results):
        values = flatten(fn(*operands, **kwargs))
        if aliased:
            values = [
                np.array(v)
                if isinstance(v, np.ndarray)
                and any(np.may_share_memory(v, results[j]) for j in aliased if j < len(results))
                else v
                for v in values
            ]
        for i, (value, out) in enumerate(zip(values, results)):
            store_result(name, i, value, out)

    return adapter


def store_result(name: str, index: int, value: Any, out: np.ndarray) -> None:
    """Copies `value` into the result view `out`, casting only where no value can change."""
    np.copyto(out, checked_result(name, index, value, out.dtype, out.shape), casting="unsafe")


def checked_result(
    name: str, index: int, value: Any, dtype: np.dtype, shape: tuple[int, ...]
) -> np.ndarray:
    """`value` as an array of `dtype` and `shape`, or an error naming the function,
    the result, and what was expected. Implicit casts are only those that keep
    every value and its kind (docs/semantics.md, "Results")."""
    expected = f"expected dtype {dtype} and shape {shape} (as declared in result_shape_dtypes)"
    if value is None:
        raise TypeError(
            f"{name} returned None for result {index}; {expected}. A function "
            f"that writes into `out` instead needs in_place=True."
        )
    if isinstance(value, (list, tuple, dict)):
        raise TypeError(
            f"{name}: result {index} is a {type(value).__name__}, not an array; "
            f"{expected}. Return an array (e.g. numpy.asarray(...))."
        )
    if type(value) in (bool, int, float, complex):
        array = _python_scalar(name, index, value, dtype)
    else:
        array = np.asarray(value)
        if array.dtype != dtype and not _keeps_values(array.dtype, dtype):
            raise TypeError(
                f"{name}: result {index} has dtype {array.dtype}, {expected}"
                f"{_x64_hint(array.dtype, dtype)}. Only casts that keep every "
                f"value and its kind happen implicitly; cast it yourself "
                f"(.astype(...)) if that is what you mean."
            )
    if array.shape != shape:
        raise ValueError(f"{name}: result {index} has shape {array.shape}, {expected}")
    return array


def _kind(dtype: np.dtype) -> str:
    for kind, parent in (
        ("bool", jnp.bool_),
        ("integer", jnp.integer),
        ("floating", jnp.floating),
        ("complex", jnp.complexfloating),
    ):
        if jnp.issubdtype(dtype, parent):
            return kind
    return dtype.str


def _keeps_values(source: np.dtype, target: np.dtype) -> bool:
    """A cast of every `source` value to `target` is exact and keeps its kind."""
    if _kind(source) != _kind(target):
        return False
    try:
        return bool(np.can_cast(source, target, "safe"))
    except TypeError:
        return False


def _x64_hint(source: np.dtype, target: np.dtype) -> str:
    if (
        not _jax_internals.config_flag("jax_enable_x64")
        and source.itemsize == 2 * target.itemsize
        and _kind(source) == _kind(target)
    ):
        return (
            f" ({source} results are {target} while jax_enable_x64 is off, as for every jax array)"
        )
    return ""


def _python_scalar(
    name: str, index: int, value: bool | int | float | complex, dtype: np.dtype
) -> np.ndarray:
    """A Python scalar takes the result's dtype when its kind allows (bool < int
    < float < complex) and the value survives: integers in range and exact,
    floats finite where they were. Floats round to the nearest value."""
    order = {"bool": 0, "integer": 1, "floating": 2, "complex": 3}
    source_kind = {bool: "bool", int: "integer", float: "floating", complex: "complex"}[type(value)]
    target_kind = _kind(dtype)
    problem = None
    if order.get(target_kind, -1) < order[source_kind] or (source_kind == "bool") != (
        target_kind == "bool"
    ):
        problem = f"a Python {type(value).__name__} cannot become {dtype} without losing its kind"
    else:
        with np.errstate(all="ignore"):
            try:
                array = np.asarray(value, dtype=dtype)
            except OverflowError:
                array = None
        if (
            array is None
            or (source_kind == "integer" and array.item() != value)
            or (
                source_kind in ("floating", "complex")
                and np.isfinite(value)
                and not np.all(np.isfinite(array))
            )
        ):
            problem = f"{value!r} does not fit in {dtype}"
    if problem:
        raise TypeError(
            f"{name}: result {index} is {value!r}: {problem}. Return an array of "
            f"dtype {dtype}, or cast it yourself."
        )
    assert array is not None  # it converted, or there was a problem
    return array
