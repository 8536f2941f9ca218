"""Lowering of the `xlabind_call` primitive, per platform: the custom call that
runs a bound function's implementation on XLA's buffers.

The platform's rule asks the bound function's implementation for the custom
call (_runtime/python_functions.py: the Python-callback handler with a
registry key; _runtime/native_targets.py: the FFI target with its attributes), and gives
it the placement that makes it run once per program, or once per device on
its shard (partitioning.py). A function with effect="ordered" gets jax's token
threaded through its call, as io_callback threads it (_runtime/ffi_custom_call.py).
"""

from __future__ import annotations

from jax.interpreters import mlir

from xlabind import _jax_internals
from xlabind._lowering import partitioning
from xlabind._primitive.primitive import Call, xlabind_call_p


def _lowering_for(platform: str):
    def rule(ctx, *operands, call: Call):
        _refuse_export(ctx, call)
        if call.fn.effect == "ordered" and partitioning.spans_devices(ctx):
            return partitioning.lower_on_first_device(ctx, call, operands)
        return partitioning.lower(ctx, call, operands, _emitter(ctx, call, platform))

    return rule


def _refuse_export(ctx, call: Call) -> None:
    implementation = call.fn.implementation
    if ctx.module_context.lowering_parameters.for_export and not implementation.exportable:
        raise implementation.export_error(call.fn.name)


def _emitter(ctx, call: Call, platform: str):
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


_jax_internals.needs_devices_to_lower(xlabind_call_p)
for _platform in ("cpu", "cuda"):
    mlir.register_lowering(xlabind_call_p, _lowering_for(_platform), platform=_platform)


def _unsupported_platform(ctx, *operands, call: Call):
    del ctx, operands
    raise NotImplementedError(
        f"xlabind: '{call.op.name}' cannot run inside a ROCm computation: xlabind runs on "
        f"CPU and CUDA devices only."
    )


mlir.register_lowering(xlabind_call_p, _unsupported_platform, platform="rocm")


def _tpu_rule(ctx, *operands, call: Call):
    """On a TPU a call runs once per program, where jax's own callbacks run:
    XLA partitions no host transfer, so no sharding rule applies (the
    operands are gathered to the first device, as for jax.pure_callback)."""
    _uncached_from_now_on()
    _refuse_export(ctx, call)
    return _emitter(ctx, call, "tpu")(ctx, *operands)


def _uncached_from_now_on() -> None:
    """Each host transfer of a TPU program needs a channel of its own, so two
    alike calls must not share one lowering (jax registers its own callbacks
    uncacheable). jax's flag is per primitive, not per platform, and its
    uncached multi-platform lowering fails (jax 0.10), so it is set only once
    a program is lowered for a TPU: the call being lowered is cached alone,
    every later one lowers anew."""
    global _TPU_SEEN
    if not _TPU_SEEN:
        _TPU_SEEN = True
        mlir.register_lowering(xlabind_call_p, _tpu_rule, platform="tpu", cacheable=False)


_TPU_SEEN = False
mlir.register_lowering(xlabind_call_p, _tpu_rule, platform="tpu")
