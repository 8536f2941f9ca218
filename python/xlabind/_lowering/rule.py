"""Lowering of the `xlabind_call` primitive, per platform, as the platform
table (_platforms.py) says: what runs a bound function's call there, whether
a sharding rule may place it per device, or why nothing can.

The implementation gives the emitter for the platform's record
(_runtime/python_functions.py: the Python-callback handler with a registry
key, or host transfers around a host callback; _runtime/native_targets.py:
the FFI target with its attributes, or its JAX formulation), and
partitioning.py the placement that makes it run once per program, or once
per device on its shard. A function with effect="ordered" gets jax's token
threaded through its call, as io_callback threads it
(_runtime/ffi_custom_call.py).

One rule per primitive, registered as jax's rule for every platform, looks
the platform up: in a program lowered for several platforms at once
(jax.export(..., platforms=...)) it emits one branch per platform itself,
since jax's own branching fails for a primitive lowered uncached (jax
0.9-0.12 add a tuple of result types to a list).
"""

from __future__ import annotations

import functools

from jax.interpreters import mlir

from xlabind import _jax_internals
from xlabind._lowering import partitioning
from xlabind._platforms import Platform, platform_record
from xlabind._primitive.primitive import PRIMITIVES, Call, xlabind_call_p


def _rule(ctx, *operands, call: Call):
    platforms = _jax_internals.lowering_platforms(ctx)
    if len(platforms) == 1:
        return _lower_on(platform_record(platforms[0]), ctx, *operands, call=call)
    rules = {p: functools.partial(_lower_on, platform_record(p)) for p in platforms}
    effects = _jax_internals.effects_of(call.fn.effect)
    return _jax_internals.lower_per_platform(
        ctx, "xlabind_call", rules, effects, *operands, call=call
    )


def _lower_on(platform: Platform, ctx, *operands, call: Call):
    if platform.refusal is not None:
        raise NotImplementedError(
            f"xlabind: '{call.op.name}' cannot run inside a {platform.name.upper()} "
            f"computation: {platform.refusal}."
        )
    _refuse_export(ctx, call)
    emit = _emitter(ctx, call, platform)
    if not call.fn.implementation.placed_on(platform):
        # Once per program, where jax's own host callbacks run: XLA partitions
        # no host transfer, so no sharding rule applies (the operands are
        # gathered to the first device, as for jax.pure_callback).
        return emit(ctx, *operands)
    if call.fn.effect == "ordered" and partitioning.spans_devices(ctx):
        return partitioning.lower_on_first_device(ctx, call, operands)
    return partitioning.lower(ctx, call, operands, emit)


def _refuse_export(ctx, call: Call) -> None:
    implementation = call.fn.implementation
    if ctx.module_context.lowering_parameters.for_export and not implementation.exportable:
        raise implementation.export_error(call.fn.name)


def _emitter(ctx, call: Call, platform: Platform):
    """The implementation's emit(ctx, *operands) for `platform`, its keepalive
    handed to the program being lowered."""
    emit, keepalive = call.fn.implementation.emitter(platform, call.fn, call)
    if keepalive is not None:
        ctx.module_context.add_keepalive(keepalive)
    return _threading_token(call.fn, emit)


def _threading_token(op, emit):
    """`emit` as emit(ctx, *operands) -> results; for an ordered function with
    jax's ordering token going into the call and coming out of it."""
    if op.effect != "ordered":
        return lambda ctx, *operands: emit(ctx, operands)[0]

    def ordered(ctx, *operands):
        results, token = emit(ctx, operands, _jax_internals.ordered_token(ctx))
        _jax_internals.set_ordered_token(ctx, token)
        return results

    return ordered


for _primitive in PRIMITIVES:
    _jax_internals.needs_devices_to_lower(_primitive)
    mlir.register_lowering(_primitive, _rule, cacheable=_primitive is xlabind_call_p)
