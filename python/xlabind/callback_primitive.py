"""The `xlabind_callback` primitive: abstract evaluation and lowering.

One primitive serves every bound function. Its parameters are the bound
`Callback` (hashed by identity), the static keyword arguments, the result tree
and the result avals; everything a rule needs is derived from those.
"""

from __future__ import annotations

from functools import partial

import jax
import numpy as np
from jax._src import dispatch  # apply_primitive: eager calls compile the primitive once
from jax.extend.core import Primitive
from jax.interpreters import mlir

from xlabind import _native

callback_p = Primitive("xlabind_callback")
callback_p.multiple_results = True
callback_p.def_impl(partial(dispatch.apply_primitive, callback_p))


@callback_p.def_abstract_eval
def _abstract_eval(*operand_avals, callback, static_kwargs, out_tree, result_avals):
    del operand_avals, callback, static_kwargs, out_tree
    return list(result_avals)


_ffi_call_python = jax.ffi.ffi_lowering(_native.PYTHON_CALLBACK_TARGET)


def _cpu_lowering(ctx, *operands, callback, static_kwargs, out_tree, result_avals):
    del result_avals
    entry = callback._registry_entry(static_kwargs, out_tree)
    # The executable keeps the entry (and so the Python callable) alive for as
    # long as it can run, even after the user dropped every reference.
    ctx.module_context.add_keepalive(entry)
    return _ffi_call_python(ctx, *operands, callback_key=np.uint64(entry.key))


def _gpu_lowering(ctx, *operands, callback, **params):
    del ctx, operands, params
    raise NotImplementedError(
        f"xlabind: '{callback.name}' is a Python callback on the CPU; it cannot run inside a "
        f"GPU computation in this version of xlabind. Place its inputs on the CPU "
        f"(jax.device_put(x, jax.devices('cpu')[0])) or run the program on the CPU.")


mlir.register_lowering(callback_p, _cpu_lowering, platform="cpu")
for _platform in ("cuda", "rocm"):
    mlir.register_lowering(callback_p, _gpu_lowering, platform=_platform)
