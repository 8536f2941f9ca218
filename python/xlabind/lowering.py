"""Lowering of the `xlabind_call` primitive, per platform: the custom call that
runs a bound function's implementation on XLA's buffers.

The platform's rule asks the bound function's implementation for its FFI
target and attributes (python_implementation.py: the Python-callback handler
with a registry key), emits the custom call, and gives it the sharding that
makes it run once per program (sharding.py), not once per device.
"""

from __future__ import annotations

import numpy as np
from jax.ffi import build_ffi_lowering_function
from jax.interpreters import mlir

from xlabind import _extension, _jax_internals, sharding
from xlabind.primitive import Call, xlabind_call_p

_python_callback_op = build_ffi_lowering_function(_extension.PYTHON_CALLBACK_TARGET)


def _lowering_for(platform: str):
    def rule(ctx, *operands, call: Call):
        op = call.fn
        if ctx.module_context.lowering_parameters.for_export:
            raise NotImplementedError(
                f"xlabind: jax.export cannot serialize '{op.name}': it calls a Python function "
                f"that lives only in this process. Export the parts of the program around it, "
                f"or bind a native FFI target instead.")
        if platform == "cuda":
            _check_cuda_dtypes(op.name, ctx)
        entry = op.implementation.registry_entry(platform, op.name, call)
        # The executable keeps the entry (and so the Python function) alive for as
        # long as it can run, even after the user dropped every reference.
        ctx.module_context.add_keepalive(entry)
        return sharding.lower(ctx, call, operands, lambda ctx, *xs: _python_callback_op(
            ctx, *xs, callback_key=np.uint64(entry.key)))

    return rule


# XLA packs these several to a byte; neither the CUDA array interface nor
# DLPack can describe that.
_PACKED = frozenset(d for d in _extension.SUPPORTED_DTYPES
                    if d.name in ("int2", "uint2", "int4", "uint4", "float4_e2m1fn"))


def _check_cuda_dtypes(name, ctx):
    for kind, avals in (("argument", ctx.avals_in), ("result", ctx.avals_out)):
        for i, aval in enumerate(avals):
            if np.dtype(aval.dtype) in _PACKED:
                raise TypeError(
                    f"{name}: {kind} {i} has dtype {aval.dtype}, which CUDA callbacks cannot "
                    f"receive: XLA packs it several to a byte. Convert it (e.g. to int8) "
                    f"around the call.")


_jax_internals.needs_devices_to_lower(xlabind_call_p)
for _platform in ("cpu", "cuda"):
    mlir.register_lowering(xlabind_call_p, _lowering_for(_platform), platform=_platform)


def _unsupported_platform(ctx, *operands, call: Call):
    del ctx, operands
    raise NotImplementedError(
        f"xlabind: '{call.op.name}' cannot run inside a ROCm computation: xlabind runs on "
        f"CPU and CUDA devices only.")


mlir.register_lowering(xlabind_call_p, _unsupported_platform, platform="rocm")
