"""The few private jax APIs xlabind needs, in one place, so that a jax upgrade
touches one file. Each is what jax's own callbacks and custom partitioning use;
`PRIVATE_NAMES` lists every one with the jax releases it is known for.
"""

from __future__ import annotations

from typing import Any, cast

import jax
from jax._src import callback as _callback
from jax._src import core as _core
from jax._src import dispatch as _dispatch
from jax._src import effects as _effects
from jax._src import sharding_impls as _sharding_impls
from jax._src import util as _util
from jax._src.custom_partitioning import custom_partitioning
from jax._src.custom_partitioning_sharding_rule import ArrayMapping, SdyShardingRule
from jax.sharding import NamedSharding, PartitionSpec

#: The jax releases CI runs xlabind beside: third_party/python/lower_bound.lock,
#: requirements.lock and newest.lock.
KNOWN_JAX = ("0.9.1", "0.10.2", "0.12.0.1")
_ALL = KNOWN_JAX

#: Every private jax name used below ("module:attribute"), with the releases
#: of KNOWN_JAX that have it. tests/api/test_jax_internals.py, run beside each
#: of them, imports every name where the table says it exists, checks that it
#: is absent where the table says so, and fails on a name used here but not
#: listed: the table says what CI saw, not what was hoped.
PRIVATE_NAMES: dict[str, tuple[str, ...]] = {
    "jax._src.callback:IOEffect": _ALL,
    "jax._src.callback:OrderedIOEffect": _ALL,
    "jax._src.callback:_IOEffect": _ALL,
    "jax._src.callback:_OrderedIOEffect": _ALL,
    "jax._src.callback:_callback_op_sharding": _ALL,
    "jax._src.callback:emit_python_callback": _ALL,
    "jax._src.core:InconclusiveDimensionOperation": _ALL,
    "jax._src.core:ManualAxisType": ("0.10.2", "0.12.0.1"),  # 0.9: `aval.vma`
    "jax._src.core:abstract_token": _ALL,
    "jax._src.core:is_symbolic_dim": _ALL,
    "jax._src.custom_partitioning:_sharding_callbacks": _ALL,
    "jax._src.custom_partitioning:custom_partitioning": _ALL,
    "jax._src.custom_partitioning_sharding_rule:ArrayMapping": _ALL,
    "jax._src.custom_partitioning_sharding_rule:SdyShardingRule": _ALL,
    "jax._src.dispatch:prim_requires_devices_during_lowering": _ALL,
    "jax._src.effects:lowerable_effects": _ALL,
    # Takes the module context first from 0.10 (detached_ordered_token).
    "jax._src.interpreters.mlir:set_sharding": _ALL,
    "jax._src.interpreters.mlir:TokenSet": _ALL,
    "jax._src.interpreters.mlir:lower_per_platform": _ALL,
    "jax._src.sharding_impls:SPMDAxisContext": _ALL,
    "jax._src.sharding_impls:ShardingContext": _ALL,
    "jax._src.util:weakref_cache_key_types": _ALL,
    "jax._src.xla_bridge:backends_are_initialized": _ALL,
}

ShardingContext = _sharding_impls.ShardingContext
SPMDAxisContext = _sharding_impls.SPMDAxisContext
# jax 0.10+ (0.9 records varying axes as a frozenset, `vma`).
_ManualAxisType: Any = getattr(_core, "ManualAxisType", None)

__all__ = [
    "KNOWN_JAX",
    "PRIVATE_NAMES",
    "ArrayMapping",
    "SdyShardingRule",
    "ShardingContext",
    "SPMDAxisContext",
    "abstract_token",
    "agree_on_varying_axes",
    "cached_weakly",
    "config_flag",
    "custom_partitioning",
    "adjust_last_partitioning",
    "detached_ordered_token",
    "effects_of",
    "IOEffect",
    "OrderedIOEffect",
    "ordered_token",
    "InconclusiveDimensionOperation",
    "is_symbolic_dim",
    "lower_per_platform",
    "lowering_platforms",
    "set_ordered_token",
    "gspmd_aborts_in_partly_manual",
    "manual_axes",
    "needs_devices_to_lower",
    "vary_over",
    "varying_axes",
    "varying_like",
]


def cached_weakly(param_type: type) -> None:
    """Makes jax's caches keyed on primitive parameters (e.g. the abstract
    evaluation cache, 2048 entries) hold parameters of `param_type` weakly, as
    they hold jaxprs: an entry then dies with the last equation that uses it,
    instead of keeping what the parameter refers to alive until evicted."""
    _util.weakref_cache_key_types.add(param_type)


#: What jax raises where a symbolic dimension cannot decide an operation.
InconclusiveDimensionOperation = _core.InconclusiveDimensionOperation


def is_symbolic_dim(d) -> bool:
    """Whether `d` is a symbolic dimension (jax.export's shape polymorphism)."""
    return _core.is_symbolic_dim(d)


def needs_devices_to_lower(primitive) -> None:
    """Makes jax lower `primitive` with the device assignment known (custom
    partitioning and one-device placement need it)."""
    _dispatch.prim_requires_devices_during_lowering.add(primitive)


def lowering_platforms(ctx) -> tuple[str, ...]:
    """The platforms the call being lowered is lowered for: one, or several
    in a program lowered for each (jax.export(..., platforms=...)), whose
    branches each see their own."""
    return tuple(ctx.platforms or ctx.module_context.platforms)


def lower_per_platform(ctx, description: str, rules: dict, effects, *operands, **params):
    """One branch per platform of the program, each lowered by its rule in
    `rules`, selected when the program runs (jax's own branching, given the
    result types as the list it adds its tokens' types to: jax hands an
    uncached lowering a tuple). `effects`: the call's own."""
    from jax._src.interpreters import mlir as _mlir

    ctx = ctx.replace(avals_out=list(ctx.avals_out))
    return _mlir.lower_per_platform(ctx, description, rules, None, effects, *operands, **params)


# -- varying manual axes (jax.shard_map with check_vma) ------------------------
# An aval records the manual mesh axes its value varies over: `vma` (a
# frozenset) in jax 0.9, `manual_axis_type.varying` from jax 0.10.


def varying_axes(aval) -> frozenset:
    """The manual mesh axes `aval`'s value varies over (empty outside shard_map,
    and inside it with check_vma=False)."""
    mat = getattr(aval, "manual_axis_type", None)
    if mat is not None:
        return frozenset(mat.varying)
    return frozenset(getattr(aval, "vma", ()))


def agree_on_varying_axes(operands):
    """The operands, each made to vary over every manual axis any of them varies
    over (jax.lax.pcast to 'varying', whose transpose is a psum), as jax's own
    primitives make their operands agree."""
    varying = [varying_axes(jax.typeof(x)) for x in operands]
    union = frozenset().union(*varying)
    if not union:
        return operands
    return [
        x if axes == union else jax.lax.pcast(x, tuple(sorted(union - axes, key=str)), to="varying")
        for x, axes in zip(operands, varying)
    ]


def varying_like(results, operand_avals, shardings=None) -> list:
    """`results` (plain avals) varying over the manual axes the operands vary
    over, and split as `shardings` say (NamedShardings under Explicit mesh
    axes: explicit_sharding.py), else whole."""
    template = max(operand_avals, key=lambda a: len(varying_axes(a)), default=None)
    varying = varying_axes(template) if template is not None else frozenset()
    if not varying:
        if shardings is None:
            return list(results)
        return [aval.update(sharding=s) for aval, s in zip(results, shardings)]
    assert template is not None  # it varies
    mesh = template.sharding.mesh
    out = []
    for j, aval in enumerate(results):
        if shardings is not None:
            sharding = shardings[j]
        else:
            sharding = NamedSharding(mesh, PartitionSpec(*([None] * len(aval.shape))))
        if hasattr(template, "manual_axis_type"):
            out.append(
                aval.update(sharding=sharding, manual_axis_type=_ManualAxisType(varying=varying))
            )
        else:
            out.append(aval.update(sharding=sharding, vma=varying))
    return out


def manual_axes(axis_context) -> tuple:
    """The manual mesh axes (of size > 1) a lowering runs under: inside
    jax.shard_map, or inside a custom partitioning's per-device lowering."""
    if not isinstance(axis_context, SPMDAxisContext):
        return ()
    mesh = axis_context.mesh
    return tuple(a for a in mesh.axis_names if a in axis_context.manual_axes and mesh.shape[a] > 1)


def config_flag(name: str) -> Any:
    """The value of jax's configuration flag `name` (public, as
    ``jax.config.<name>``, but declared to no type checker)."""
    return getattr(jax.config, name)


def partly_manual(axis_context) -> bool:
    """Whether a lowering runs inside a shard_map manual over some of the
    mesh's axes (of size > 1) only."""
    if not isinstance(axis_context, SPMDAxisContext):
        return False
    mesh = axis_context.mesh
    return any(a not in axis_context.manual_axes and mesh.shape[a] > 1 for a in mesh.axis_names)


def gspmd_aborts_in_partly_manual(axis_context) -> bool:
    """Whether XLA would abort on a custom call inside a shard_map manual over
    some mesh axes only: with GSPMD (not Shardy) in jax < 0.10's XLA
    ("Check failed: target.IsManualSubgroup() == sharding().IsManualSubgroup()")."""
    if config_flag("jax_use_shardy_partitioner") or not isinstance(axis_context, SPMDAxisContext):
        return False
    if jax.__version_info__[:2] >= (0, 10):
        return False
    return partly_manual(axis_context)


def vary_over(x, axes: tuple):
    """`x`, made to vary over every one of the manual `axes` (for a collective)."""
    missing = tuple(a for a in axes if a not in varying_axes(jax.typeof(x)))
    return jax.lax.pcast(x, missing, to="varying") if missing else x


def backends_are_initialized() -> bool:
    """Whether jax has started its backends (then an FFI type registered for
    a plugin platform such as CUDA reaches XLA at once)."""
    from jax._src import xla_bridge

    return xla_bridge.backends_are_initialized()


# -- side effects (a bound function's `effect`) --------------------------------
# jax.experimental.io_callback's own effect objects: jax's rules refuse, by
# identity, what they cannot do with them (vmap of a cond or while_loop with a
# batched predicate, which would run the effect for elements that took the
# other branch or had left the loop; remat), and the ordered one shares its
# token with io_callback(ordered=True), so the two kinds of call keep one
# program order, also across consecutive jitted calls and over several devices.
abstract_token = _core.abstract_token


class IOEffect(_callback.IOEffect):
    """io_callback's unordered effect, as one jax.export can serialize: every
    instance (deserializing makes a new one) equals jax's own, so jax's rules
    and token threading treat xlabind's calls and io_callbacks alike."""

    def __eq__(self, other):
        return other is _callback._IOEffect or type(other) is type(self)

    def __hash__(self):
        return hash(_callback._IOEffect)


class OrderedIOEffect(_callback.OrderedIOEffect):
    """io_callback's ordered effect (one token for both), serializable."""

    def __eq__(self, other):
        return other is _callback._OrderedIOEffect or type(other) is type(self)

    def __hash__(self):
        return hash(_callback._OrderedIOEffect)


# Deserializing finds an effect's class among the lowerable ones, by name; the
# other effect sets (control flow, ordered, shardable) test isinstance.
_effects.lowerable_effects.add_type(IOEffect)
_effects.lowerable_effects.add_type(OrderedIOEffect)
_IO_EFFECT = IOEffect()
_ORDERED_IO_EFFECT = OrderedIOEffect()


def effects_of(effect: str | None) -> set:
    """The jax effects of a call of a function with this `effect`."""
    if effect is None:
        return set()
    return {_ORDERED_IO_EFFECT if effect == "ordered" else _IO_EFFECT}


def ordered_token(ctx):
    """The ordered effect's token coming into the call being lowered."""
    return ctx.tokens_in.get(_ORDERED_IO_EFFECT)


def detached_ordered_token(ctx):
    """`ctx` with its incoming ordered token passed through an optimization
    barrier placed on the program's first device, as io_callback places its
    own token: the computation xlabind lowers the call into would otherwise
    make XLA's partitioners give a preceding io_callback's token a replicated
    sharding, which XLA refuses for a side-effecting call (jax >= 0.11 with
    results, and jax 0.9)."""
    import inspect

    from jax._src.interpreters import mlir
    from jax.extend.mlir.dialects import stablehlo

    token = ctx.tokens_in.get(_ORDERED_IO_EFFECT)
    sharding = _callback._callback_op_sharding(
        ctx.module_context.axis_context, None, [abstract_token]
    )
    if token is None or sharding is None:
        return ctx
    barrier = stablehlo.OptimizationBarrierOp([token])
    if "ctx" in inspect.signature(mlir.set_sharding).parameters:  # jax >= 0.10
        mlir.set_sharding(ctx.module_context, barrier, sharding)
    else:  # jax < 0.10's signature, unknown to the jax type-checked against
        cast(Any, mlir).set_sharding(barrier, sharding)
    tokens = ctx.tokens_in.update_tokens(mlir.TokenSet({_ORDERED_IO_EFFECT: barrier.result}))
    return ctx.replace(tokens_in=tokens)


def emit_host_callback(ctx, host, token, operands, *, has_side_effect: bool, name: str):
    """(results, token out): `host` called on the host with the operands, as
    jax.pure_callback and io_callback lower (on a TPU: XLA's send/recv host
    transfers, one channel each), placed on the program's first device, as
    they place it. `token` is the ordered effect's token, or None. `name`:
    the bound function's, for the error where this machine cannot lower it."""
    sharding = _callback._callback_op_sharding(ctx.module_context.axis_context, None, ctx.avals_out)
    try:
        results, token_out, _ = _callback.emit_python_callback(
            ctx,
            host,
            token,
            list(operands),
            ctx.avals_in,
            ctx.avals_out,
            has_side_effect=has_side_effect,
            returns_token=token is not None,
            sharding=sharding,
        )
    except ValueError as error:
        # jax sets up the transfers with the lowering platform's client; a
        # machine without that platform has none ("the platform for the
        # specified backend ... is different from the lowering platform").
        if "is different from the lowering platform" not in str(error):
            raise
        platform = tuple(ctx.module_context.platforms)[0]
        raise NotImplementedError(
            f"xlabind: '{name}' is a Python function, which a {platform.upper()} program "
            f"calls through host transfers that only jax on a machine with a "
            f"{platform.upper()} can set up; this machine's jax runs on "
            f"{jax.default_backend().upper()}. Lower the program where it will run."
        ) from error
    return list(results), token_out


def set_ordered_token(ctx, token) -> None:
    """Hands on the token the call being lowered returned, to the next ordered call."""
    from jax.interpreters import mlir

    ctx.set_tokens_out(ctx.tokens_in.update_tokens(mlir.TokenSet({_ORDERED_IO_EFFECT: token})))


def adjust_last_partitioning(ctx, side_effect: bool, key: str | None) -> None:
    """Adjusts the custom partitioning call just emitted: `side_effect` marks it
    side-effecting (jax's lowering makes it pure, whatever the function it
    partitions does), so that XLA keeps it when its results are unused; `key`
    names its partitioning callbacks instead of jax's object id (new in every
    process, so every process's program would be a new persistent cache
    entry). Calls with one key must partition alike; where one is registered
    and alive, it serves this program too, and lives as long as it does."""
    from jax._src import custom_partitioning as _partitioning
    from jax.extend.mlir import ir

    for op in reversed(list(ir.InsertionPoint.current.block.operations)):
        if (
            op.operation.name == "stablehlo.custom_call"
            and ir.StringAttr(op.attributes["call_target_name"]).value == "CustomSPMDPartitioning"
        ):
            break
    else:  # pragma: no cover
        raise AssertionError("xlabind: no custom partitioning call to adjust")
    if side_effect:
        op.attributes["has_side_effect"] = ir.BoolAttr.get(True)
    if key is None:
        return
    callbacks = _partitioning._sharding_callbacks
    own = callbacks[ir.StringAttr(op.attributes["backend_config"]).value.encode()]
    registered = callbacks.setdefault(key.encode(), own)
    ctx.module_context.add_keepalive(registered)
    op.attributes["backend_config"] = ir.StringAttr.get(key)
