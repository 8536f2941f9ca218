"""How a bound function runs when it is a native XLA FFI target: the custom call
names the target, with static attributes and the call's keyword arguments as
FFI attributes. It is another implementation beside the Python one
(python_functions.py); what the bound function *is* (its shapes, its
linearity, its vmap method) does not change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard

import numpy as np
from jax.extend.mlir.dialects import stablehlo
from jax.interpreters import mlir

from xlabind._platforms import Platform, platform_name, platform_names
from xlabind._primitive.static_kwargs import freeze
from xlabind._runtime import extension as _extension
from xlabind._runtime import ffi_custom_call


@dataclasses.dataclass(frozen=True)
class FfiTarget:
    """A registered XLA FFI target, bound in place of a Python function.

    Create one with :func:`xlabind.ffi_target`. ``attributes`` are static FFI
    attributes of every call; a call's keyword arguments are added to them.
    ``takes_token``: the target's first operand and first result are jax's
    ordering token (needed for ``effect="ordered"``).

    Example:
      >>> import xlabind
      >>> target = xlabind.ffi_target("xlabind_noop", platforms=("cpu", "cuda"), scale=2.0)
      >>> target.name, target.platforms, target.attributes
      ('xlabind_noop', ('cpu', 'cuda'), (('scale', 2.0),))
    """

    name: str
    platforms: tuple[str, ...] = ("cpu",)
    attributes: tuple[tuple[str, Any], ...] = ()
    takes_token: bool = False
    #: Pairs of a platform and the JAX formulation that a program on it lowers
    #: in the target's place where it runs no native handlers (a TPU):
    #: called as ``formulation(*operands, result_avals, **attributes)``, it
    #: returns a list of results.
    formulations: tuple[tuple[str, Callable[..., list]], ...] = ()

    @property
    def tpu_formulation(self) -> Callable[..., list] | None:
        """The formulation for TPUs, or None."""
        return dict(self.formulations).get("tpu")


def ffi_target(
    name: str,
    *,
    platforms=("cpu",),
    takes_token: bool = False,
    formulations: Mapping[str, Callable[..., list]] | None = None,
    tpu_formulation: Callable[..., list] | None = None,
    **attributes,
) -> FfiTarget:
    """A registered XLA FFI target (typed API, api_version=1) to bind with
    :func:`xlabind.callback`, :func:`xlabind.linear`, :func:`xlabind.multilinear`
    or :func:`xlabind.nonlinear` in place of a Python function.

    The target receives the operands as buffers and writes the results; static
    ``attributes`` and the call's keyword arguments arrive as FFI attributes,
    typed as jax.ffi types them: Python ints as i64, floats as f64, bools,
    strings; NumPy scalars keep their type (``np.float32(x)`` for an
    ``Attr<float>``, ``np.uint64(x)`` for an ``Attr<uint64_t>``); NumPy arrays
    of numbers, and tuples of numbers as i64 or f64 arrays. Under
    ``vmap_method="native"`` it also receives ``batch_axes``: an i64 array of
    operands × vmap levels, -1 where a level does not batch an operand.
    ``platforms``: ``"cpu"``, ``"cuda"`` (any case) or a sequence of them.
    ``takes_token=True``: the handler's first operand and first result are
    jax's ordering token (``.Arg<ffi::Token>()`` and ``.Ret<ffi::Token>()``
    first in its binding), which a bound function with ``effect="ordered"``
    threads through it so that XLA runs its calls in program order, as
    ``jax.experimental.io_callback(..., ordered=True)`` does; without
    ``effect="ordered"`` the handler receives a fresh token. Register
    targets first, e.g. with :func:`xlabind.register_ffi_targets`.

    TPUs run no native handlers: a program lowered for a TPU refuses the
    target, naming it, unless ``formulations={"tpu": fn}`` gives the same
    computation in JAX, ``fn(*operands, result_avals, **attributes) ->
    [results...]`` (``result_avals``: the results' shapes and dtypes; the
    attributes as above), which a program lowered for a TPU lowers in the
    target's place, whatever machine lowers it (``tpu_formulation=fn`` is
    the same).

    Example:
      >>> import jax.numpy as jnp, xlabind
      >>> noop = xlabind.callback(xlabind.ffi_target("xlabind_noop"), lambda x: x)
      >>> noop(jnp.ones(2)).shape
      (2,)
    """
    if not isinstance(name, str) or not name:
        raise TypeError(
            f"xlabind.ffi_target: name must be the registered target's name (a "
            f"non-empty str), got {name!r}"
        )
    platforms = platform_names(f"xlabind.ffi_target({name!r})", platforms)
    for key, value in attributes.items():  # refused here, not at the first lowering
        ffi_attribute(key, f"xlabind.ffi_target({name!r})", value)
    if not isinstance(takes_token, bool):
        raise TypeError(
            f"xlabind.ffi_target({name!r}): takes_token must be a bool, got {takes_token!r}"
        )
    where = f"xlabind.ffi_target({name!r})"
    if not isinstance(formulations, (Mapping, type(None))):
        raise TypeError(
            f"{where}: formulations must be a dict of platform -> function, "
            f"got {type(formulations).__name__}"
        )
    by_platform = dict(formulations or {})
    if tpu_formulation is not None:
        by_platform["tpu"] = tpu_formulation
    checked = {}
    for platform, fn in by_platform.items():
        what = "tpu_formulation" if fn is tpu_formulation else f"formulations[{platform!r}]"
        if not callable(fn):
            raise TypeError(f"{where}: {what} must be callable, got {type(fn).__name__}")
        checked[platform_name(where, platform)] = fn
    frozen = tuple(sorted((k, freeze(v)) for k, v in attributes.items()))
    return FfiTarget(name, platforms, frozen, takes_token, tuple(checked.items()))


def is_native(fn: Any) -> TypeGuard[FfiTarget | Mapping[str, FfiTarget]]:
    if isinstance(fn, FfiTarget):
        return True
    return (
        isinstance(fn, Mapping) and bool(fn) and all(isinstance(f, FfiTarget) for f in fn.values())
    )


def targets_by_platform(fn: FfiTarget | Mapping[str, FfiTarget]) -> dict[str, FfiTarget]:
    if isinstance(fn, FfiTarget):
        return dict.fromkeys(fn.platforms, fn)
    return {platform_name("xlabind: the targets by platform", p): t for p, t in fn.items()}


_INT64 = np.iinfo(np.int64)
# Element types an FFI array attribute can have.
_ARRAY_KINDS = "biuf"


def ffi_attribute(name: str, owner: str, value: Any) -> Any:
    """A Python value as something jax turns into an FFI attribute (jax.ffi's
    typing: NumPy scalars keep their type)."""
    if isinstance(value, (bool, np.bool_)):
        return np.bool_(value)
    if isinstance(value, np.number):
        return value
    if isinstance(value, int):
        if not _INT64.min <= value <= _INT64.max:
            raise TypeError(
                f"{owner}: keyword argument '{name}' is {value}, which does not fit "
                f"an i64 FFI attribute; pass np.uint64({value}) for an unsigned "
                f"attribute (Attr<uint64_t>)"
            )
        return np.int64(value)
    if isinstance(value, float):
        return np.float64(value)
    if isinstance(value, str):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in _ARRAY_KINDS or value.dtype.itemsize > 8:
            raise TypeError(
                f"{owner}: keyword argument '{name}' is an array of {value.dtype}, "
                f"which cannot be an FFI attribute; arrays of bools, integers or "
                f"floats (up to 64 bits) can"
            )
        return value
    if isinstance(value, Mapping):
        # A structured attribute: an MLIR dictionary, an ffi::Dictionary in the handler.
        for key in value:
            if not isinstance(key, str):
                raise TypeError(
                    f"{owner}: keyword argument '{name}' is a dict with the key "
                    f"{key!r}; an FFI dictionary attribute's keys are strings"
                )
        return {key: ffi_attribute(f"{name}.{key}", owner, v) for key, v in value.items()}
    if isinstance(value, tuple) and all(isinstance(v, (int, np.integer)) for v in value):
        return np.asarray(value, dtype=np.int64)
    if isinstance(value, tuple) and all(isinstance(v, (int, float, np.number)) for v in value):
        return np.asarray(value, dtype=np.float64)
    raise TypeError(
        f"{owner}: keyword argument '{name}' is a {type(value).__name__}, which "
        f"cannot be an FFI attribute; pass a bool, int, float, str, NumPy scalar, "
        f"NumPy array, tuple of numbers, or a dict of these (nested dicts too)"
    )


def _ir_values(attributes: dict) -> dict:
    """The attributes as jax lowers them, except u64 values past i64's range,
    which jax's own conversion cannot build (MLIR takes a signed 64-bit
    integer): their bits, typed ui64. Called where an MLIR context exists."""
    from jax.extend.mlir import ir

    out = dict(attributes)
    for key, value in attributes.items():
        if isinstance(value, np.uint64) and value > _INT64.max:
            out[key] = ir.IntegerAttr.get(ir.IntegerType.get_unsigned(64), int(value) - 2**64)
        elif isinstance(value, dict):
            out[key] = _ir_values(value)
    return out


def check_targets(
    name: str, targets: Mapping[str, FfiTarget], vmap_method: str, effect: str | None
) -> None:
    """What a bound function's targets must be for its options: each takes jax's
    token when its calls are ordered; no static attribute xlabind would
    overwrite (an error, not a surprise)."""
    if effect == "ordered":
        for target in targets.values():
            if not target.takes_token:
                raise ValueError(
                    f"{name}: effect='ordered' needs FFI targets that take jax's ordering "
                    f"token, and {target.name!r} was not declared to: XLA orders calls by "
                    f"what they read and write, so the calls of a target without the token "
                    f"may run in any order. Bind the target's handler with "
                    f".Arg<ffi::Token>() and .Ret<ffi::Token>() first, and declare it with "
                    f"xlabind.ffi_target({target.name!r}, takes_token=True); or use "
                    f"effect='unordered'."
                )
    if vmap_method != "native":
        return
    for target in targets.values():
        if "batch_axes" in dict(target.attributes):
            raise TypeError(
                f"{name}: the FFI target {target.name!r} has a static attribute "
                f"'batch_axes', which xlabind passes itself under "
                f"vmap_method='native' (the batch layout); rename it"
            )


def handler_refusal(op_name: str, target_name: str, platform: str) -> str:
    """Why a native target cannot run on a platform that runs no native
    handlers (a TPU), and what to use."""
    where = platform.upper()
    return (
        f"xlabind: '{op_name}' calls the native FFI target '{target_name}', and {where}s run "
        f"no native FFI handlers (XLA on a {where} has no registry of user handlers, for C++ "
        f"or CUDA alike). On a {where}, bind a Python function instead (xlabind.nonlinear and "
        f"the other constructors run it on the host through XLA's host callbacks), give the "
        f"target a JAX formulation (xlabind.ffi_target(..., formulations={{'{platform}': fn}})), "
        f"or place the inputs on a CPU device (jax.device_put(x, jax.devices('cpu')[0]))."
    )


class NativeImplementation:
    """Native FFI targets by platform."""

    in_place = False
    synchronize = False
    #: Native targets live in the artifact's own custom call, so jax.export works.
    exportable = True
    #: A pure computation: on arrays no device splits, every device may run
    #: it on its own copy (partitioning.py), as XLA runs its own ops.
    replicable = True
    #: Alike calls lower alike, on every platform.
    lowering_cacheable = True

    def __init__(self, targets: dict[str, FfiTarget]):
        self.targets = targets
        #: Platform -> the JAX formulation of the targets there.
        self.formulations = {p: f for t in targets.values() for p, f in t.formulations}

    @staticmethod
    def placed_on(platform: Platform) -> bool:
        """A custom call and a formulation alike may run per device on a shard."""
        del platform
        return True

    @property
    def primary_function(self) -> FfiTarget:
        return self.targets.get("cpu") or next(iter(self.targets.values()))

    @property
    def platforms(self) -> tuple[str, ...]:
        return tuple(self.targets)

    @staticmethod
    def export_error(name: str) -> Exception:
        """Never raised (native targets export); the Implementation interface's."""
        return NotImplementedError(f"xlabind: '{name}' exports")

    def check_dtype(self, name: str, what: str, dtype) -> None:
        del name, what, dtype  # the handler decides what it accepts

    def emitter(self, record: Platform, op, call):
        """(emit(ctx, *operands) -> the call's results, keepalive or None), on
        `record`'s platform: the target's custom call where the platform runs
        handlers, else its formulation for the platform, else refused."""
        platform = record.name
        target = self.targets.get(platform) if record.runs_handlers else None
        if target is None and platform in self.formulations:
            return self._formulation_emitter(platform, op, call), None
        if not record.runs_handlers:
            target_name = self.primary_function.name
            raise NotImplementedError(handler_refusal(op.name, target_name, platform))
        if target is None:
            raise NotImplementedError(
                f"xlabind: '{op.name}' has no {platform.upper()} implementation (its FFI "
                f"targets are for {', '.join(self.targets)} only)."
            )
        # Stateful targets registered before jax's backends started wait for this.
        _extension.register_callback_handlers(platform)
        missing = _extension.UNAVAILABLE.get((platform, target.name))
        if missing:
            raise NotImplementedError(
                f"xlabind: '{op.name}' cannot run on {platform.upper()}: {missing}"
            )
        attributes = dict(target.attributes)
        for key, value in call.kwargs.as_dict().items():
            attributes[key] = value
        attributes = {k: ffi_attribute(k, op.name, v) for k, v in attributes.items()}
        if op.vmap_method == "native" and call.batch_axes is not None:
            attributes["batch_axes"] = np.asarray(
                [-1 if a is None else a for entry in call.batch_axes for a in entry], np.int64
            )
        attributes = _ir_values(attributes)
        # Aliases and has_side_effect (primitive.Call.custom_call_options).
        options = call.custom_call_options
        name = target.name
        if call.reports_status and (platform, name) in _extension.STATUS_VARIANTS:
            # Built with xlabind_extension: a variant that reports its error as the
            # status instead of failing (xlabind/native/call_status.h).
            name += _extension.STATUS_TARGET_SUFFIX
        elif call.reports_status:
            # Registered some other way: its errors stop only the device it fails on
            # (docs/semantics.md, "Errors"); the status says success. The aliases name the
            # function's own results, which come first: they hold without the status.
            def emit_without_status(ctx, operands, token=None):
                results, token = emit(ctx.replace(avals_out=ctx.avals_out[:-1]), operands, token)
                return [
                    *results,
                    mlir.ir_constant(np.zeros(_extension.STATUS_BYTES, np.uint8)),
                ], token

            def emit(ctx, operands, token=None):
                return self._emit(name, target, ctx, operands, attributes, options, token)

            return emit_without_status, None
        return (
            lambda ctx, operands, token=None: self._emit(
                name, target, ctx, operands, attributes, options, token
            )
        ), None

    def _formulation_emitter(self, platform: str, op, call):
        """The targets' JAX formulation for `platform` (xlabind.ops's for TPUs),
        lowered in the custom call's place with the same attributes."""
        target = self.primary_function
        formulation = self.formulations[platform]
        attributes = {**dict(target.attributes), **call.kwargs.as_dict()}
        if op.vmap_method == "native" and call.batch_axes is not None:
            attributes["batch_axes"] = call.batch_axes

        def emit(ctx, operands, token=None):
            avals_out = ctx.avals_out[:-1] if call.reports_status else ctx.avals_out
            lowered = mlir.lower_fun(
                lambda *args: formulation(*args, result_avals=avals_out, **attributes),
                multiple_results=True,
            )
            results = list(lowered(ctx.replace(avals_out=avals_out), *operands))
            if call.reports_status:
                results.append(mlir.ir_constant(np.zeros(_extension.STATUS_BYTES, np.uint8)))
            return results, token

        return emit

    @staticmethod
    def _emit(name, target, ctx, operands, attributes, options, token):
        if not target.takes_token:
            # A target that takes no token (effect="unordered", or none).
            return ffi_custom_call.emit(name, ctx, operands, attributes, options)
        if token is None:  # not ordered: a fresh token, whose successor is dropped
            token = stablehlo.create_token()
            results, _ = ffi_custom_call.emit(name, ctx, operands, attributes, options, token)
            return results, None
        return ffi_custom_call.emit(name, ctx, operands, attributes, options, token)
